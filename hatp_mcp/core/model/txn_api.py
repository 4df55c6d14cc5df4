"""The wire objects an agent exchanges with a coordinator: hatp/txn/{begin,status,abort} and the pending list.

`hatp/txn/begin` takes a Plan as its params (no envelope: the plan is the request). `TxnQuery` asks for one
transaction, `TxnAbortRequest` asks the coordinator to abort one, and every answer is a `TxnStatus`: its state,
the decision, the votes recorded so far, the outcome and, once closed, the whole Transaction Record. Pure: no IO.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.base import Ident, JsonObject, Timestamp, WireModel
from hatp_mcp.core.model.evidence import DIGEST_PATTERN
from hatp_mcp.core.model.gateway_messages import AskedPerson

__all__ = [
    "BranchOutcome",
    "FirstRefusal",
    "TxnAbortRequest",
    "TxnList",
    "TxnQuery",
    "TxnStatus",
    "VoteSummary",
    "WaitingOn",
]

TxnStateName = Literal[
    "new",
    "quoting",
    "preparing",
    "approving",
    "committing",
    "in-doubt",
    "aborting",
    "committed",
    "aborted",
    "needs-recovery",
]


class TxnQuery(WireModel):
    """hatp/txn/status sent to a coordinator: what it knows of one transaction.

    `waitSeconds` asks the coordinator to answer once the transaction has ended, or after that many seconds; with
    `afterEvents` it answers as soon as the record holds more events than that (to follow progress).
    """

    type: Literal["hatp.txn-query"] = "hatp.txn-query"
    txn_id: Ident
    wait_seconds: int | None = Field(default=None, ge=0, le=300)
    after_events: int | None = Field(default=None, ge=0)


class TxnAbortRequest(WireModel):
    """hatp/txn/abort sent to a coordinator by the agent: abort the transaction unless commit is decided."""

    type: Literal["hatp.txn-abort"] = "hatp.txn-abort"
    txn_id: Ident
    reason: str | None = Field(default=None, max_length=2000)


class VoteSummary(WireModel):
    """The latest recorded vote of one branch (or approval requirement): who voted and how."""

    branch_id: Ident
    voter: str = Field(max_length=500)
    decision: str = Field(max_length=40)


class BranchOutcome(WireModel):
    """What became of one branch (or approval requirement) of a closed transaction, read from its record.

    `result` is one of committed, released (a hold let go), undone (compensated), not-committed (aborted before
    its effect), refused (a no vote or a refused receipt), in-doubt, approved, rejected, or no-answer."""

    branch_id: Ident
    result: str = Field(max_length=40)
    code: str | None = Field(default=None, max_length=64)


class FirstRefusal(WireModel):
    """A no in a record (the first one, or one of all of them): which branch or approver refused, its code and its
    own reason (for a person's reject, the words their signed decision carries, HATP-GW-87)."""

    branch_id: Ident
    event: str = Field(max_length=64)
    code: str | None = Field(default=None, max_length=64)
    reason: str | None = Field(default=None, max_length=2000)


class WaitingOn(WireModel):
    """An approval the transaction waits for (HATP-MCP-54): the requirement, the signed deadline of the gateway's
    pending vote, who must act now (display name and roles, never an address or contact) and the ask's page in
    the organisation's inbox, the link an agent gives its user. `people` and `link` are the gateway's words, absent
    until the coordinator has heard them; `decideByWords`, the deadline as the agent tells its user: UTC with "in N
    min" from the coordinator's clock (HATP-GW-96: a model has no zone of its own)."""

    requirement_id: Ident
    decide_by: Timestamp | None = None
    decide_by_words: str | None = Field(default=None, max_length=200)
    people: list[AskedPerson] = Field(default_factory=list, max_length=100)
    link: str | None = Field(default=None, max_length=2000)


class TxnStatus(WireModel):
    """A coordinator's answer about one transaction. `outcome` is present once it can no longer change
    (HATP-MCP-65): `closed` says whether the record is closed too; while it is not, `confirming` names the holds
    still being committed (an answered COMMITTED promises what HATP-TXN-26 says, no more). `record` is present
    once the record is closed; so are
    `results` (per branch), `firstRefusal` and `refusals` (the first no, and every no in record order, HATP-MCP-55),
    `decisionReason` and `recordDigest` (sha256 of the record's canonical form), the short account an agent reads
    without the whole record. `waitingOn`, before the decision: the approvals still open, who must act on each, by
    when and where (HATP-MCP-54)."""

    type: Literal["hatp.txn-status"] = "hatp.txn-status"
    txn_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    state: TxnStateName
    decision: Literal["commit", "abort"] | None = None
    outcome: Literal["COMMITTED", "ABORTED", "NEEDS_RECOVERY"] | None = None
    closed: bool = False
    confirming: list[Ident] = Field(default_factory=list, max_length=1000)
    votes: list[VoteSummary] = Field(default_factory=list)
    event_count: int = Field(ge=0)
    results: list[BranchOutcome] = Field(default_factory=list)
    first_refusal: FirstRefusal | None = None
    refusals: list[FirstRefusal] = Field(default_factory=list)
    waiting_on: list[WaitingOn] = Field(default_factory=list)
    decision_reason: str | None = Field(default=None, max_length=2000)
    record_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    record: JsonObject | None = None


class TxnList(WireModel):
    """The transactions a coordinator has not finished (the agent tool `list_pending`)."""

    type: Literal["hatp.txn-list"] = "hatp.txn-list"
    txns: list[TxnStatus] = Field(default_factory=list)

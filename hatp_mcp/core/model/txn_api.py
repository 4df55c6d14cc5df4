"""The wire objects an agent exchanges with a coordinator: hatp/txn/{begin,status,abort} and the pending list.

`hatp/txn/begin` takes a Plan as its params (no envelope: the plan is the request). `TxnQuery` asks for one
transaction, `TxnAbortRequest` asks the coordinator to abort one, and every answer is a `TxnStatus`: its state,
the decision, the votes recorded so far, the outcome and, once closed, the whole Transaction Record. Pure: no IO.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.base import Ident, JsonObject, WireModel
from hatp_mcp.core.model.evidence import DIGEST_PATTERN

__all__ = ["BranchOutcome", "FirstRefusal", "TxnAbortRequest", "TxnList", "TxnQuery", "TxnStatus", "VoteSummary"]

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
    """The first no in a record: which branch or approver refused, its code and its own reason."""

    branch_id: Ident
    event: str = Field(max_length=64)
    code: str | None = Field(default=None, max_length=64)
    reason: str | None = Field(default=None, max_length=2000)


class TxnStatus(WireModel):
    """A coordinator's answer about one transaction. `record` is present once the record is closed; so are
    `results` (per branch), `firstRefusal` (when something refused), `decisionReason` and `recordDigest` (sha256 of
    the record's canonical form), the short account an agent reads without the whole record."""

    type: Literal["hatp.txn-status"] = "hatp.txn-status"
    txn_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    state: TxnStateName
    decision: Literal["commit", "abort"] | None = None
    outcome: Literal["COMMITTED", "ABORTED", "NEEDS_RECOVERY"] | None = None
    votes: list[VoteSummary] = Field(default_factory=list)
    event_count: int = Field(ge=0)
    results: list[BranchOutcome] = Field(default_factory=list)
    first_refusal: FirstRefusal | None = None
    decision_reason: str | None = Field(default=None, max_length=2000)
    record_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    record: JsonObject | None = None


class TxnList(WireModel):
    """The transactions a coordinator has not finished (the agent tool `list_pending`)."""

    type: Literal["hatp.txn-list"] = "hatp.txn-list"
    txns: list[TxnStatus] = Field(default_factory=list)

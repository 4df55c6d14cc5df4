"""The request / result messages between a coordinator and a participant (hatp/txn/*) and for locks (hatp/lock/*).

These are the params and results of the MCP methods of the binding; in memory they are passed as is. Signed
evidence (votes, receipts) travels inside results as the raw JSON object the participant signed, so the
coordinator verifies and records it exactly as received. Pure: no IO.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from hatp_mcp.core.model.base import Ident, JsonObject, Seconds, Timestamp, WireModel
from hatp_mcp.core.model.evidence import DIGEST_PATTERN, Preconditions, RecordHead
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms

__all__ = [
    "AbortRequest",
    "BranchResult",
    "CommitRequest",
    "CompensateRequest",
    "LockAcquireRequest",
    "LockReleaseRequest",
    "LockRenewRequest",
    "LockResult",
    "PrepareRequest",
    "PrepareResult",
    "RenewRequest",
    "StatusRequest",
    "StatusResult",
]

Evidence = JsonObject


class PrepareRequest(WireModel):
    """hatp/txn/prepare and hatp/txn/quote: the whole plan (the participant checks its digest) and its branch.

    `quoteOnly` asks for a quote (dry run with `validUntil`, no hold placed): approval-first mode.
    `terms` (to a Human Gateway only, holds-first): the ask opens already bound to them, before anyone is
    notified, so no one decides without them (spec/mcp-binding.md HATP-MCP-9); a participant ignores it.
    """

    type: Literal["hatp.prepare"] = "hatp.prepare"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    plan: Plan
    coordinator: str = Field(min_length=1, max_length=500)
    quote_only: bool = False
    terms: ApprovalTerms | None = None
    # the coordinator's durable record head when it sent this request; the answer signs it (HATP-REC-19)
    record_head: RecordHead | None = None
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (spec/mcp-binding.md HATP-TRUST-1)


class PrepareResult(WireModel):
    """The participant's signed vote and its signed receipt (preconditions, reported cost, lease)."""

    type: Literal["hatp.prepare-result"] = "hatp.prepare-result"
    vote: Evidence
    receipt: Evidence


class CommitRequest(WireModel):
    """hatp/txn/commit: the preconditions the prepare receipt reported come back; any change refuses the commit."""

    type: Literal["hatp.commit"] = "hatp.commit"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    preconditions: Preconditions = Field(default_factory=Preconditions)
    # the coordinator-signed `decision` record event (commit) this commit carries out, and the digest of this branch's
    # signed yes vote that decision rests on (HATP-TRUST-7)
    decision: Evidence | None = None
    vote_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    # the fencing token of each resource the branch's `locks` name, as hatp/lock/acquire granted it (HATP-LOCK-6)
    lock_tokens: dict[str, Annotated[int, Field(ge=1, le=2**53 - 1)]] | None = None
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (spec/mcp-binding.md HATP-TRUST-1)


class AbortRequest(WireModel):
    """hatp/txn/abort: release a hold or forget a dry run. Idempotent; an unknown branch is remembered as aborted."""

    type: Literal["hatp.abort"] = "hatp.abort"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    reason: str | None = Field(default=None, max_length=2000)
    # the coordinator's durable record head when it sent this request; the answer signs it (HATP-REC-19)
    record_head: RecordHead | None = None
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (spec/mcp-binding.md HATP-TRUST-1)


class CompensateRequest(WireModel):
    """hatp/txn/compensate: undo a committed compensate-tier branch with the undo token its commit returned."""

    type: Literal["hatp.compensate"] = "hatp.compensate"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    undo_token: str | None = Field(default=None, max_length=500)
    # the coordinator's durable record head when it sent this request; the answer signs it (HATP-REC-19)
    record_head: RecordHead | None = None
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (spec/mcp-binding.md HATP-TRUST-1)


class RenewRequest(WireModel):
    """hatp/txn/renew: extend a hold's lease (the participant caps it at its horizon)."""

    type: Literal["hatp.renew"] = "hatp.renew"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    lease_seconds: Seconds
    # the coordinator's durable record head when it sent this request; the answer signs it (HATP-REC-19)
    record_head: RecordHead | None = None
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (spec/mcp-binding.md HATP-TRUST-1)


class BranchResult(WireModel):
    """The result of commit, abort, compensate and renew: the participant's signed receipt."""

    type: Literal["hatp.branch-result"] = "hatp.branch-result"
    receipt: Evidence


class StatusRequest(WireModel):
    """hatp/txn/status: what the participant knows of one branch."""

    type: Literal["hatp.status"] = "hatp.status"
    txn_id: Ident
    branch_id: Ident


class StatusResult(WireModel):
    """What the participant knows of one branch. `committing` / `compensating`: the effect's intent is durable and
    the effect may have happened, but it has no result (receipt) yet (HATP-PART-10/12): neither is `prepared`
    nor `committed` (HATP-MCP-2)."""

    type: Literal["hatp.status-result"] = "hatp.status-result"
    txn_id: Ident
    branch_id: Ident
    state: Literal[
        "unknown", "prepared", "refused", "committing", "committed", "compensating", "aborted", "compensated"
    ]
    receipt: Evidence | None = None


class LockAcquireRequest(WireModel):
    """hatp/lock/acquire: a lease on `resource` for `owner`; the result carries a fencing token.

    A lock is taken for one branch of one transaction: `owner` is the `txnId` (HATP-LOCK-5), and `auth` is the
    coordinator's signed TxnAuth for it (method `lock-acquire`, HATP-LOCK-4)."""

    type: Literal["hatp.lock-acquire"] = "hatp.lock-acquire"
    resource: str = Field(min_length=1, max_length=500)
    owner: str = Field(min_length=1, max_length=500)
    lease_seconds: Seconds
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (HATP-LOCK-4)


class LockRenewRequest(WireModel):
    type: Literal["hatp.lock-renew"] = "hatp.lock-renew"
    resource: str = Field(min_length=1, max_length=500)
    token: int = Field(ge=1, le=2**53 - 1)
    lease_seconds: Seconds
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (HATP-LOCK-4)


class LockReleaseRequest(WireModel):
    type: Literal["hatp.lock-release"] = "hatp.lock-release"
    resource: str = Field(min_length=1, max_length=500)
    token: int = Field(ge=1, le=2**53 - 1)
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    auth: Evidence | None = None  # the coordinator's signed TxnAuth (HATP-LOCK-4)


class LockResult(WireModel):
    """The lock after acquire / renew / release. Tokens only grow: a write with an older token is stale."""

    type: Literal["hatp.lock-result"] = "hatp.lock-result"
    resource: str = Field(min_length=1, max_length=500)
    owner: str = Field(min_length=1, max_length=500)
    token: int = Field(ge=1, le=2**53 - 1)
    expires_at: Timestamp
    released: bool = False

"""The Plan: what the agent asks to do, as one all-or-nothing transaction, and its Branches. Pure.

The plan digest (`Plan.digest()`) is sha256 of the canonical wire form; every vote, receipt, approval and record
event names it. A Plan is frozen and treated as immutable (nested lists included: nothing edits one in place; a
changed plan is a `model_copy`, a new object), so its digest is computed once per object and remembered. Static
checks beyond types live in hatp_mcp.core.validate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast

from pydantic import Field

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import DecimalStr, Ident, JsonObject, Seconds, Timestamp, WireModel

__all__ = [
    "ApprovalRequirement",
    "Branch",
    "ChainLink",
    "Compensation",
    "Deadlines",
    "Escalation",
    "Mandate",
    "Mode",
    "OffSessionReauth",
    "Plan",
    "Recovery",
    "Requester",
    "Tier",
    "remembered",
]

Tier = Literal["hold", "compensate", "final"]
Mode = Literal["auto", "parallel", "approval-first", "holds-first"]


class Compensation(WireModel):
    """How a compensate-tier branch is undone: the operation and its arguments."""

    operation: str = Field(min_length=1, max_length=200)
    args: JsonObject = Field(default_factory=dict)


class Branch(WireModel):
    """One operation on one participant.

    - hold: prepare places a hold for `leaseSeconds` (the participant may cap it), renewable up to
      `holdHorizonSeconds`; commit must succeed while the lease runs.
    - compensate: prepare is a dry run; commit does the effect and returns an undo token usable for
      `undoWindowSeconds`; `compensation` names the undo.
    - final: prepare is a dry run; commit is irreversible.
    `maxDurationSeconds` bounds one call (prepare or commit); absent means unbounded.
    `settles` names branches whose cost this branch pays (so totals count it once).
    """

    branch_id: Ident
    participant: str = Field(min_length=1, max_length=500)
    operation: str = Field(min_length=1, max_length=200)
    tier: Tier
    args: JsonObject = Field(default_factory=dict)
    amount: Amount | None = None
    tolerance_percent: DecimalStr | None = None
    lease_seconds: Seconds | None = None
    hold_horizon_seconds: Seconds | None = None
    max_duration_seconds: Seconds | None = None
    undo_window_seconds: Seconds | None = None
    compensation: Compensation | None = None
    settles: list[Ident] = Field(default_factory=list)
    preconditions: dict[str, str] | None = None


class ChainLink(WireModel):
    """One person (or group) in an approver's escalation chain, with the SLA it decides within."""

    address: str = Field(min_length=1, max_length=500)
    decide_seconds: Seconds | None = None


class ApprovalRequirement(WireModel):
    """A human vote the transaction needs.

    `maxAmount` is what the agent asks the approver to authorize; the gateway recomputes the plan's own totals
    and refuses a requirement below them. `chain` is the worst-case escalation path, in order.
    """

    id: Ident
    address: str = Field(min_length=1, max_length=500)
    action: str = Field(min_length=1, max_length=200)
    max_amount: Amount | None = None
    decide_by: Timestamp | None = None
    chain: list[ChainLink] = Field(default_factory=list)


class Requester(WireModel):
    """Whom the agent acts for (never an approver of this plan) and which agent wrote it."""

    principal: str = Field(min_length=1, max_length=500)
    agent: str = Field(min_length=1, max_length=500)


class Deadlines(WireModel):
    decide_by: Timestamp | None = None
    commit_by: Timestamp | None = None


class Mandate(WireModel):
    """What the principal allowed the agent: spend caps per currency and an expiry."""

    max_spend: list[Amount] = Field(default_factory=list)
    expires_at: Timestamp | None = None


class Escalation(WireModel):
    """Who is told, and how long before the first hold's horizon, when a transaction is in doubt."""

    lead_seconds: Seconds
    to: str = Field(min_length=1, max_length=500)


class OffSessionReauth(WireModel):
    consented: bool
    max_amount: Amount | None = None


class Recovery(WireModel):
    """What the payer consented to in advance for recovery after an in-doubt final step."""

    off_session_reauth: OffSessionReauth


class Plan(WireModel):
    """A transaction plan. `summary` is agent-written text and is always shown labelled as such."""

    hatp: Literal["1"] = "1"
    txn_id: Ident
    created_at: Timestamp
    requester: Requester
    summary: str | None = Field(default=None, max_length=2000)
    mode: Mode = "auto"
    deadlines: Deadlines = Field(default_factory=Deadlines)
    mandate: Mandate | None = None
    approvals: list[ApprovalRequirement] = Field(default_factory=list)
    escalation: Escalation | None = None
    recovery: Recovery | None = None
    branches: list[Branch] = Field(min_length=1, max_length=64)

    def digest(self) -> str:
        """`sha256:<hex>` of the canonical wire form, computed once per Plan object (see the module docstring)."""
        return remembered(self, "digest", WireModel.digest)

    def branch(self, branch_id: str) -> Branch:
        """Raises KeyError when no branch has that id."""
        for b in self.branches:
            if b.branch_id == branch_id:
                return b
        raise KeyError(branch_id)


_KEPT = 512  # plans in flight at once in one process, with room to spare
_MEMO: dict[int, tuple[Plan, dict[str, Any]]] = {}  # id -> (the plan itself, what was computed from it)
T = TypeVar("T")


def remembered(plan: Plan, what: str, compute: Callable[[Plan], T]) -> T:
    """`compute(plan)`, computed once per Plan object and kept for its most recent plans (see the module docstring:
    a Plan is never changed in place, so what is computed from it stays true). The value is shared: treat it as
    read-only."""
    hit = _MEMO.get(id(plan))
    if hit is None or hit[0] is not plan:
        if len(_MEMO) >= _KEPT:
            del _MEMO[next(iter(_MEMO))]  # the oldest; holding the plan keeps its id from being reused meanwhile
        hit = _MEMO[id(plan)] = (plan, {})
    kept = hit[1]
    if what not in kept:
        kept[what] = compute(plan)
    return cast(T, kept[what])

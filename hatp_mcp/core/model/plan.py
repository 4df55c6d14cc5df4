"""The Plan: what the agent asks to do, as one all-or-nothing transaction, and its Branches. Pure.

The plan digest (`Plan.digest()`) is sha256 of the canonical wire form; every vote, receipt, approval and record
event names it. A Plan is frozen and treated as immutable (nested lists included: nothing edits one in place; a
changed plan is a `model_copy`, a new object), so its digest is computed once per object and remembered. Static
checks beyond types live in hatp_mcp.core.validate.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal, Self, TypeVar, cast

from pydantic import Field, model_validator
from pydantic_core import PydanticSerializationError

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import DecimalStr, Ident, JsonObject, Seconds, Timestamp, WireModel
from hatp_mcp.core.signing.canonical import canonical_typed, digest_bytes, surely_canonical

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
    "has_canonical_form",
    "remembered",
]

Tier = Literal["hold", "compensate", "final"]
Mode = Literal["auto", "parallel", "approval-first", "holds-first"]


class Compensation(WireModel):
    """How a compensate-tier branch is undone: the operation and its arguments."""

    operation: str = Field(min_length=1, max_length=200, description="The participant's undo operation.")
    args: JsonObject = Field(default_factory=dict, description="Its arguments (the undo token is added).")


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

    branch_id: Ident = Field(description='Unique within the plan, e.g. "seat".')
    participant: str = Field(
        min_length=1, max_length=500, description="The participant's HATP id, e.g. mcp://airline.example/hatp."
    )
    operation: str = Field(
        min_length=1, max_length=200, description="An operation the participant advertises, e.g. seat.hold."
    )
    tier: Tier = Field(
        description="hold (reserved now, released on abort), compensate (done at commit, undone after), or "
        "final (irreversible; at most one per plan, committed last)."
    )
    args: JsonObject = Field(default_factory=dict, description="The operation's arguments. No floats.")
    amount: Amount | None = Field(default=None, description="What this branch costs, when it costs money.")
    tolerance_percent: DecimalStr | None = Field(
        default=None, description='How far above `amount` the real cost may be, in percent, e.g. "2".'
    )
    lease_seconds: Seconds | None = Field(default=None, description="hold only (required): how long a hold lasts.")
    hold_horizon_seconds: Seconds | None = Field(
        default=None, description="hold only: the longest the hold may be renewed to, at least leaseSeconds."
    )
    max_duration_seconds: Seconds | None = Field(
        default=None, description="The longest one call (prepare or commit) may take; absent means unbounded."
    )
    undo_window_seconds: Seconds | None = Field(
        default=None, description="compensate only (required): how long after commit the effect can be undone."
    )
    compensation: Compensation | None = Field(default=None, description="compensate only (required): the undo.")
    settles: list[Ident] = Field(
        default_factory=list, description="branchIds whose cost this branch pays, so totals count it once."
    )
    preconditions: dict[str, str] | None = Field(
        default=None, description="Versions the participant must still see at commit; usually left out."
    )
    locks: list[Annotated[str, Field(min_length=1, max_length=500)]] | None = Field(
        default=None,
        max_length=16,
        description="Resources this branch writes that the coordinator locks at the participant (hatp/lock/*) "
        "from prepare to commit; the commit carries their fencing tokens. Only for a participant that serves locks.",
    )


class ChainLink(WireModel):
    """One person (or group) in an approver's escalation chain, with the SLA it decides within."""

    address: str = Field(min_length=1, max_length=500, description="A human:// address, e.g. human://acme.com/frank.")
    decide_seconds: Seconds | None = Field(default=None, description="How long this link has to decide.")


class ApprovalRequirement(WireModel):
    """A human vote the transaction needs.

    `maxAmount` is what the agent asks the approver to authorize; the gateway recomputes the plan's own totals
    and refuses a requirement below them. `chain` is the worst-case escalation path, in order.
    """

    id: Ident = Field(description='Unique within the plan, e.g. "finance".')
    address: str = Field(
        min_length=1,
        max_length=500,
        description="Who decides: a human:// address such as human://acme.com/role/finance-approver (never the "
        "requester's principal).",
    )
    action: str = Field(min_length=1, max_length=200, description="The authority asked for, e.g. travel.spend.")
    max_amount: Amount | None = Field(
        default=None, description="What the approver authorizes: at least the plan's total in that currency."
    )
    decide_by: Timestamp | None = Field(default=None, description="When the humans must have decided (future).")
    chain: list[ChainLink] = Field(default_factory=list, description="The escalation path, in order.")


class Requester(WireModel):
    """Whom the agent acts for (never an approver of this plan) and which agent wrote it."""

    principal: str = Field(
        min_length=1, max_length=500, description="The person the agent acts for, e.g. human://acme.com/dana."
    )
    agent: str = Field(min_length=1, max_length=500, description="The agent, e.g. agent://acme.com/travel-bot.")


class Deadlines(WireModel):
    """When the transaction must be decided and committed; both in the future, decideBy first."""

    decide_by: Timestamp | None = Field(default=None, description="Every vote (human and participant) by then.")
    commit_by: Timestamp | None = Field(default=None, description="Committed by then, else it aborts.")


class Mandate(WireModel):
    """What the principal allowed the agent: spend caps per currency and an expiry."""

    max_spend: list[Amount] = Field(default_factory=list, description="At most this much, per currency.")
    expires_at: Timestamp | None = Field(default=None, description="The mandate's end, after deadlines.commitBy.")


class Escalation(WireModel):
    """Who is told, and how long before the first hold's horizon, when a transaction is in doubt."""

    lead_seconds: Seconds = Field(description="How long before the first hold's horizon to tell them.")
    to: str = Field(min_length=1, max_length=500, description="A human:// address, e.g. human://acme.com/role/ops.")


class OffSessionReauth(WireModel):
    """Whether the payer agreed to be charged again without being present, and up to how much."""

    consented: bool = Field(description="True only if the payer agreed in advance.")
    max_amount: Amount | None = Field(default=None, description="Up to how much.")


class Recovery(WireModel):
    """What the payer consented to in advance for recovery after an in-doubt final step."""

    off_session_reauth: OffSessionReauth = Field(description="Charging the payer again while they are away.")


class Plan(WireModel):
    """A transaction plan. `summary` is agent-written text and is always shown labelled as such."""

    hatp: Literal["1"] = Field(default="1", description='The protocol version: "1".')
    txn_id: Ident = Field(description="A new id for each transaction; the same id again must be the same plan.")
    created_at: Timestamp = Field(description="When the plan was written (now).")
    requester: Requester
    summary: str | None = Field(
        default=None, max_length=2000, description="What the transaction does, in a sentence people read."
    )
    mode: Mode = Field(
        default="auto", description="How to run it; auto lets the coordinator choose from the plan's times."
    )
    deadlines: Deadlines = Field(default_factory=Deadlines)
    mandate: Mandate | None = Field(default=None, description="What the principal allowed the agent to spend.")
    approvals: list[ApprovalRequirement] = Field(
        default_factory=list, description="The human votes the transaction needs."
    )
    escalation: Escalation | None = Field(default=None, description="Who is told when it is in doubt.")
    recovery: Recovery | None = Field(default=None, description="What the payer consented to for recovery.")
    branches: list[Branch] = Field(
        min_length=1, max_length=64, description="The operations, all or none. At most one final branch."
    )

    def digest(self) -> str:
        """`sha256:<hex>` of the canonical wire form, computed once per Plan object (see the module docstring)."""
        return remembered(self, "digest", _digest)

    @model_validator(mode="after")
    def _validated(self) -> Self:
        # This object passed validation, so every typed member holds its type (has_canonical_form relies on it);
        # a model_copy, model_construct or copy is never marked.
        remembered(self, "validated", _yes)
        return self

    def branch(self, branch_id: str) -> Branch:
        """Raises KeyError when no branch has that id."""
        for b in self.branches:
            if b.branch_id == branch_id:
                return b
        raise KeyError(branch_id)


# What was computed from each live Plan, by id: the one memo of Plans (bench.mechanisms prints what it gains). An
# entry lives exactly as long as its plan, so no cold plan is kept alive: a weak reference's callback drops it when
# the plan is freed, before its id can be reused.
_MEMO: dict[int, tuple[weakref.ref[Plan], dict[str, Any]]] = {}
T = TypeVar("T")


def remembered(plan: Plan, what: str, compute: Callable[[Plan], T]) -> T:
    """`compute(plan)`, computed once per Plan object and kept while the plan lives (see the module docstring: a
    Plan is never changed in place, so what is computed from it stays true). The value is shared: treat it as
    read-only."""
    key = id(plan)
    hit = _MEMO.get(key)
    if hit is None or hit[0]() is not plan:
        hit = _MEMO[key] = (weakref.ref(plan, partial(_forget, _MEMO, key)), {})
    kept = hit[1]
    if what not in kept:
        kept[what] = compute(plan)
    return cast(T, kept[what])


def _forget(memo: dict[int, tuple[weakref.ref[Plan], dict[str, Any]]], key: int, ref: weakref.ref[Plan]) -> None:
    # `memo` is bound when the entry is made, so this still works while the interpreter tears modules down
    hit = memo.get(key)
    if hit is not None and hit[0] is ref:  # not a newer plan's entry under a reused id
        del memo[key]


def _digest(plan: Plan) -> str:
    """`WireModel.digest(plan)`, with canonical's walk limited to the plan's free-form JSON (branch and
    compensation `args`). Every other member is typed as a string, a bounded integer, a boolean or an object or
    list of those (tests/core/model/test_plan.py proves it over the model's fields), and the dump refuses a value
    that is not of its field's type (`warnings="error"`: a `model_copy(update=...)` is not validated), so only
    `args` can hold a float or a value without a canonical form. Same bytes and same CanonicalError as the
    whole-value path, which runs instead when the dump refuses."""
    try:
        wire = plan.__pydantic_serializer__.to_python(
            plan, mode="json", by_alias=True, exclude_none=True, warnings="error"
        )
    except PydanticSerializationError:
        return WireModel.digest(plan)
    free: list[Any] = []
    for b in wire["branches"]:
        free.append(b["args"])
        comp = b.get("compensation")
        if comp is not None:
            free.append(comp["args"])
    return digest_bytes(canonical_typed(wire, free))


def _yes(plan: Plan) -> bool:
    return True


def has_canonical_form(plan: Plan) -> None:
    """Raise the CanonicalError `plan.digest()` would raise (HATP-CANON-2), and nothing when it would raise none,
    computing the digest only when that cannot be proven without it. Proven without it for a plan validation made
    (marked by `_validated`) whose branch and compensation `args` are surely canonical (`surely_canonical`): its
    typed members hold their types (tests/core/model/test_plan.py: strings without lone surrogates, bounded
    integers, booleans), and plain JSON values dump as they are, so the canonical form exists."""
    hit = _MEMO.get(id(plan))
    if hit is not None and hit[0]() is plan:
        kept = hit[1]
        if "digest" in kept:
            return
        if kept.get("validated"):
            free: list[Any] = []
            for b in plan.branches:
                free.append(b.args)
                if b.compensation is not None:
                    free.append(b.compensation.args)
            if surely_canonical(free):
                return
    plan.digest()

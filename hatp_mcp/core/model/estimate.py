"""Wire objects of `hatp/txn/estimate` and `hatp/txn/tighten` (spec/mcp-binding.md HATP-MCP-17..19). Pure: no IO.

- EstimateRequest -> Estimate: the gateway's signed worst case for one approval requirement of a plan, as it will
  actually route it (core/gateway/estimate.py).
- TightenRequest -> VoteResult: the coordinator shrinks an ask's deadline and, in holds-first mode, names the
  holds' end times the person approves under (core/gateway/terms.py).
- BoundsRequest -> OperationBounds: a participant's advertised bounds of one branch's operation.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hatp_mcp.core.model.base import Ident, Seconds, SignedModel, Timestamp, WireModel
from hatp_mcp.core.model.evidence import DIGEST_PATTERN
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import HoldTerm

__all__ = ["BoundsRequest", "Estimate", "EstimateRequest", "EstimateStep", "OperationBounds", "TightenRequest"]


class EstimateRequest(WireModel):
    """hatp/txn/estimate on the gateway: the whole plan (its digest checked) and the requirement to estimate."""

    type: Literal["hatp.estimate-request"] = "hatp.estimate-request"
    txn_id: Ident
    requirement_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    plan: Plan


class EstimateStep(WireModel):
    """One person in the order the gateway would ask them, in seconds after the ask opens, if everyone before let
    their SLA run out."""

    human: str = Field(min_length=1, max_length=500)
    asked_after_seconds: Seconds
    due_after_seconds: Seconds
    delegate_for: str | None = None


class Estimate(SignedModel):
    """The gateway's signed worst case until a decision on one requirement, from `issuedAt`.

    `worstSeconds` is None when nothing bounds it. `decideBy` is the deadline the gateway would sign;
    `understated` lists the plan's chain links whose `decideSeconds` is below the card SLA of a person they name
    (JSON paths into the plan): the agent's numbers are reported, never trusted (HATP-GW-29)."""

    type: Literal["hatp.estimate"] = "hatp.estimate"
    txn_id: Ident
    requirement_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    gateway: str = Field(min_length=1, max_length=500)
    worst_seconds: Seconds | None
    order: list[EstimateStep] = Field(default_factory=list)
    decide_by: Timestamp
    understated: list[str] = Field(default_factory=list)
    issued_at: Timestamp


class TightenRequest(WireModel):
    """hatp/txn/tighten: a new (never later) deadline for a pending ask and, for holds-first, the holds' ends."""

    type: Literal["hatp.tighten"] = "hatp.tighten"
    txn_id: Ident
    requirement_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    decide_by: Timestamp
    holds: list[HoldTerm] = Field(default_factory=list, max_length=64)
    auth: dict[str, Any] | None = None  # the coordinator's signed TxnAuth (spec/mcp-binding.md HATP-TRUST-1)


class BoundsRequest(WireModel):
    """hatp/txn/estimate on a participant: which branch of which plan (the plan's digest checked)."""

    type: Literal["hatp.bounds-request"] = "hatp.bounds-request"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    plan: Plan


class OperationBounds(WireModel):
    """A participant's bounds for one branch's operation, as it advertises them (None: it promises none)."""

    type: Literal["hatp.operation-bounds"] = "hatp.operation-bounds"
    txn_id: Ident
    branch_id: Ident
    operation: str = Field(min_length=1, max_length=200)
    tier: Literal["hold", "compensate", "final"]
    max_lease_seconds: Seconds | None = None
    max_hold_seconds: Seconds | None = None
    max_duration_seconds: Seconds | None = None

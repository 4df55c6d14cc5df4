"""The terms a human approves under: the approval deadline and, in holds-first mode, the holds' end times.

`ApprovalTerms` travels in the Ask (what the person is shown), in the person's HumanDecisionProof (what they
signed) and in the gateway's Approval (what the coordinator checks against what it sent). It is set only by
`hatp/txn/tighten` (spec/gateway.md HATP-GW-30..33). Pure: no IO.
"""

from __future__ import annotations

from pydantic import Field

from hatp_mcp.core.model.base import Ident, Timestamp, WireModel

__all__ = ["ApprovalTerms", "HoldTerm"]


class HoldTerm(WireModel):
    """One placed hold as its participant signed it: the lease's end and the latest it will hold with renewals."""

    branch_id: Ident
    lease_expires_at: Timestamp
    hold_horizon: Timestamp | None = None


class ApprovalTerms(WireModel):
    """The deadline the person decides by and the holds their approval relies on (in branch order)."""

    decide_by: Timestamp
    holds: list[HoldTerm] = Field(default_factory=list, max_length=64)

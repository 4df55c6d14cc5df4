"""What the coordinator does with the gateway's estimate and with approval terms (spec/coordinator.md
HATP-MODE-5..8). Pure: takes `now`, returns numbers, terms and commands; reads no clock, does no IO.

- `human_worst` / `mode_fits`: the clock fit's numbers with the human's worst case replaced by the worse of the
  plan's declared bound and the gateway's signed estimate, per requirement (no estimate: unbounded, fail closed).
- `TermsMixin`: a mixin of hatp_mcp.core.coordinator.Coordinator that asks the gateway to tighten a pending ask
  when the coordinator's approval deadline is earlier than the gateway's, and in holds-first mode names the holds'
  end times, and checks an approving Approval's terms against the terms the gateway accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from hatp_mcp.core.humans.terms import check_sent_terms, same_terms
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms, HoldTerm
from hatp_mcp.core.txn.events import Command, Record, Tighten
from hatp_mcp.core.validate.clockfit import MODES, human_bound
from hatp_mcp.errors import HatpError

if TYPE_CHECKING:
    from hatp_mcp.core.txn.machine import Coordinator

__all__ = ["TermsMixin", "human_worst", "mode_fits"]


def _worse(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def human_worst(plan: Plan, now: datetime, estimates: Mapping[str, int | None]) -> int | None:
    """HATP-MODE-5: the largest over the requirements of max(plan's bound, gateway's estimate); a requirement
    without an estimate (or an unbounded one) is unbounded. No requirement: 0."""
    worst: int | None = 0
    for i, req in enumerate(plan.approvals):
        each = _worse(human_bound(plan, req, i, now).seconds, estimates.get(req.id))
        worst = _worse(worst, each)
    return worst


def mode_fits(prepare: int | None, commit: int | None, human: int | None, horizon: int | None) -> tuple[str, ...]:
    """The clock fit's arithmetic (spec/validation.md section 2) with a given human worst case."""

    def add(*parts: int | None) -> int | None:
        return None if any(p is None for p in parts) else sum(p or 0 for p in parts)

    worst = {
        "parallel": None if prepare is None or human is None else add(max(prepare, human), commit),
        "holds-first": add(prepare, human, commit),
        "approval-first": add(prepare, commit),
    }
    return tuple(m for m in MODES if horizon is None or (worst[m] is not None and (worst[m] or 0) <= horizon))


class TermsMixin:
    """Tighten and terms handling. Only ever used as a base of Coordinator (which provides `_c()` and `_d`)."""

    def _c(self) -> Coordinator:
        return self  # type: ignore[return-value]

    def _holds_terms(self) -> ApprovalTerms | None:
        """holds-first: the approval deadline and every placed hold's end times, from their signed receipts."""
        d = self._c()._d
        if d.deadline is None:
            return None
        return ApprovalTerms(decide_by=format_ts(d.deadline), holds=self._holds())

    def _holds(self) -> list[HoldTerm]:
        c = self._c()
        d = c._d
        return [
            HoldTerm(
                branch_id=b.branch_id,
                lease_expires_at=format_ts(d.leases[b.branch_id]),
                hold_horizon=format_ts(d.horizons[b.branch_id]) if b.branch_id in d.horizons else None,
            )
            for b in c.plan.branches
            if c.mode == "holds-first" and b.tier == "hold" and b.branch_id in d.leases
        ]

    def _tighten(self, now: datetime) -> list[Command]:
        """HATP-MODE-7: ask the gateway to shrink each pending ask whose signed deadline is later than ours, and in
        holds-first to bind the placed holds' end times; once per distinct terms."""
        c = self._c()
        d = c._d
        if d.deadline is None:
            return []
        out: list[Command] = []
        for rid, theirs in d.gw_deadline.items():
            if d.approvals.get(rid) != "pending":
                continue
            holds_first = c.mode == "holds-first"
            if d.deadline >= theirs and not (holds_first and rid not in d.terms_sent):
                continue
            terms = ApprovalTerms(decide_by=format_ts(min(d.deadline, theirs)), holds=self._holds())
            if same_terms(d.terms_sent.get(rid), terms):
                continue
            d.terms_sent[rid] = terms
            out.append(Tighten(requirement_id=rid, terms=terms))
        return out

    def _terms_accepted(self, rid: str, terms: ApprovalTerms) -> list[Command]:
        d = self._c()._d
        if same_terms(d.terms.get(rid), terms):
            return []
        d.terms[rid] = terms
        return [Record(event="approval.terms", body={"requirementId": rid, "terms": terms.wire()})]

    def _check_terms(self, rid: str, parsed: Approval | None, incoming: ApprovalTerms | None) -> None:
        """HATP-MODE-8: an approving Approval (as check_approver_answer parsed it) carries the terms the gateway
        accepted (`incoming`: accepted with this very answer), in holds-first with the holds. Raises HatpError
        HATP-MODE-8 (TERMS_MISMATCH)."""
        c = self._c()
        if parsed is None:
            return
        accepted = incoming if incoming is not None else c._d.terms.get(rid)
        check_sent_terms(parsed, accepted)
        if c.mode == "holds-first" and parsed.decision == "approve" and (accepted is None or not accepted.holds):
            if any(b.tier == "hold" for b in c.plan.branches):
                raise HatpError(
                    "HATP-MODE-8",
                    "holds-first: the approval does not carry the holds' end times the person approved under",
                    path="$.approval.terms",
                    fix="abort: the person never saw the holds their approval relies on",
                    code="TERMS_MISMATCH",
                )

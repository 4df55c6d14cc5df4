"""What the coordinator does with approval terms (spec/coordinator.md HATP-MODE-7/8). Pure: takes the machine's
data and `now`, returns terms and commands; reads no clock, does no IO.

`tighten` asks the gateway to shrink a pending ask when the coordinator's approval deadline is earlier than the
gateway's, and in holds-first mode names the holds' end times; `check_terms` checks an approving Approval's terms
against the terms the gateway accepted. (The gateway's estimate in mode choice is hatp_mcp.core.txn.timing's.)
"""

from __future__ import annotations

from datetime import datetime

from hatp_mcp.core.gateway.terms import check_sent_terms, same_terms
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.terms import ApprovalTerms, HoldTerm
from hatp_mcp.core.txn.data import Txn
from hatp_mcp.core.txn.events import Command, Record, Tighten
from hatp_mcp.errors import HatpError

__all__ = ["check_terms", "holds_terms", "terms_accepted", "tighten"]


def holds_terms(t: Txn) -> ApprovalTerms | None:
    """holds-first: the approval deadline and every placed hold's end times, from their signed receipts."""
    if t.approvals.deadline is None:
        return None
    return ApprovalTerms(decide_by=format_ts(t.approvals.deadline), holds=_holds(t))


def _holds(t: Txn) -> list[HoldTerm]:
    h = t.holds
    return [
        HoldTerm(
            branch_id=b.branch_id,
            lease_expires_at=format_ts(h.leases[b.branch_id]),
            hold_horizon=format_ts(h.horizons[b.branch_id]) if b.branch_id in h.horizons else None,
        )
        for b in t.plan.branches
        if t.mode == "holds-first" and b.tier == "hold" and b.branch_id in h.leases
    ]


def tighten(t: Txn, now: datetime) -> list[Command]:
    """HATP-MODE-7: ask the gateway to shrink each pending ask whose signed deadline is later than ours, and in
    holds-first to bind the placed holds' end times; once per distinct terms."""
    a = t.approvals
    if a.deadline is None:
        return []
    out: list[Command] = []
    for rid, theirs in a.gw_deadline.items():
        if a.status.get(rid) != "pending":
            continue
        holds_first = t.mode == "holds-first"
        if a.deadline >= theirs and not (holds_first and rid not in a.terms_sent):
            continue
        terms = ApprovalTerms(decide_by=format_ts(min(a.deadline, theirs)), holds=_holds(t))
        if same_terms(a.terms_sent.get(rid), terms):
            continue
        a.terms_sent[rid] = terms
        out.append(Tighten(requirement_id=rid, terms=terms))
    return out


def terms_accepted(t: Txn, rid: str, terms: ApprovalTerms) -> list[Command]:
    if same_terms(t.approvals.terms.get(rid), terms):
        return []
    t.approvals.terms[rid] = terms
    return [Record(event="approval.terms", body={"requirementId": rid, "terms": terms.wire()})]


def check_terms(t: Txn, rid: str, parsed: Approval | None, incoming: ApprovalTerms | None) -> None:
    """HATP-MODE-8: an approving Approval (as check_approver_answer parsed it) carries the terms the gateway
    accepted (`incoming`: accepted with this very answer), in holds-first with the holds. Raises HatpError
    HATP-MODE-8 (TERMS_MISMATCH)."""
    if parsed is None:
        return
    accepted = incoming if incoming is not None else t.approvals.terms.get(rid)
    check_sent_terms(parsed, accepted)
    if t.mode == "holds-first" and parsed.decision == "approve" and (accepted is None or not accepted.holds):
        if any(b.tier == "hold" for b in t.plan.branches):
            raise HatpError(
                "HATP-MODE-8",
                "holds-first: the approval does not carry the holds' end times the person approved under",
                path="$.approval.terms",
                fix="abort: the person never saw the holds their approval relies on",
                code="TERMS_MISMATCH",
            )

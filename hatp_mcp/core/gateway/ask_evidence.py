"""What the gateway signs about an ask: the routing record, the vote, the approval and the answer, built from
an AskRecord. Pure and unsigned: the runtime signs with its "gateway" key and supplies the nonce.

Contact details are never in an AskRecord, so nothing built here can carry them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from hatp_mcp.core.gateway.asks import ask_digest
from hatp_mcp.core.gateway.authority import plan_money
from hatp_mcp.core.gateway.machine import AskState, state_of
from hatp_mcp.core.gateway.screen import person_words
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval, Quorum, RoutedHuman, RoutingRecord, Vote
from hatp_mcp.core.model.gateway import Answer, AskRecord
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError

__all__ = ["build_answer", "build_approval", "build_vote", "check_routing", "routing_record"]


def routing_record(rec: AskRecord) -> RoutingRecord:
    """Every human the address matched (and every delegate considered) with their status, rule and detail.
    Raises ValueError for an ask without a requester (only approvals have routing records, and every approval
    names its requester)."""
    if rec.ask.requester is None:
        raise ValueError(f"ask {rec.ask.ask_id} names no requester: it cannot be approved")
    humans = [RoutedHuman(human=s.human, status=s.status, rule=s.rule, detail=s.detail) for s in rec.seats]
    return RoutingRecord(
        address=rec.ask.address,
        plan_digest=rec.ask.plan_digest or ask_digest(rec.ask),
        requester=rec.ask.requester,
        plan_totals=rec.plan_totals,
        up_to=rec.up_to,
        checked=rec.checked,
        humans=humans,
    )


def build_vote(rec: AskRecord, voter: str, now: datetime, names: Mapping[str, str] | None = None) -> Vote:
    """pending (with the signed deadline) while open; yes once approved; no otherwise, with code and reason: who
    rejected by the display name on their card with the address beside it (`names`, HATP-GW-93), and their reason."""
    state = state_of(rec)
    if rec.ask.txn_id is None or rec.ask.requirement_id is None or rec.ask.plan_digest is None:
        raise ValueError("only a plan's approval ask has a vote")
    base = Vote(
        txn_id=rec.ask.txn_id,
        branch_id=rec.ask.requirement_id,
        plan_digest=rec.ask.plan_digest,
        voter=voter,
        decision="pending",
        decide_by=rec.ask.decide_by,
        issued_at=format_ts(now),
    )
    if state is AskState.PENDING:
        return base
    if state is AskState.APPROVED:
        return base.model_copy(update={"decision": "yes", "decide_by": None})
    code = rec.code or ("REJECTED" if state is AskState.REJECTED else state.value.upper())
    reason = rec.reason or "; ".join(
        f"rejected by {person_words(d.approver, names)}"
        + (f": {d.reason}" if d.reason else "")  # their signed words (HATP-GW-87)
        for d in rec.decisions
        if d.decision == "reject"
    )
    return base.model_copy(update={"decision": "no", "decide_by": None, "code": code, "reason": reason[:2000] or None})


def build_approval(rec: AskRecord, gateway: str, nonce: str, now: datetime) -> Approval | None:
    """The Approval once humans decided (approve or reject); None while pending or when no one decided."""
    state = state_of(rec)
    if state not in (AskState.APPROVED, AskState.REJECTED) or rec.ask.requirement_id is None:
        return None
    return Approval(
        approval_id=f"{rec.ask.ask_id.replace('/', '.')}",
        subject="plan",
        txn_id=rec.ask.txn_id,
        requirement_id=rec.ask.requirement_id,
        plan_digest=rec.ask.plan_digest or ask_digest(rec.ask),
        decision="approve" if state is AskState.APPROVED else "reject",
        decisions=rec.decisions,
        quorum=Quorum(required=rec.quorum_required, of=rec.quorum_of),
        routing=routing_record(rec),
        gateway=gateway,
        nonce=nonce,
        issued_at=format_ts(now),
        expires_at=rec.ask.decide_by,
        terms=rec.ask.terms,
    )


def build_answer(rec: AskRecord, gateway: str, nonce: str, now: datetime) -> Answer | None:
    """The Answer once a person answered a question ask; None otherwise."""
    if state_of(rec) is not AskState.ANSWERED or rec.answered_by is None or rec.answer_value is None:
        return None
    return Answer(
        ask_id=rec.ask.ask_id,
        kind=rec.ask.kind,  # type: ignore[arg-type]
        subject_digest=ask_digest(rec.ask),
        txn_id=rec.ask.txn_id,
        plan_digest=rec.ask.plan_digest,
        answerer=rec.answered_by,
        value=rec.answer_value,
        answered_at=rec.closed_at or format_ts(now),
        gateway=gateway,
        nonce=nonce,
        issued_at=format_ts(now),
        proof=rec.answer_proof,
        passkey=rec.answer_passkey,
    )


def check_routing(routing: RoutingRecord, plan: Plan, plan_digest: str | None = None) -> None:
    """Offline: recompute what the authority check must have used from the plan itself, and compare.

    `plan_digest`, when the caller has it, saves recomputing it. Raises HatpError HATP-GW-7 when the record names
    another plan, claims `absent` (or other amounts) for a plan
    that moves money, or misstates the totals; HATP-GW-2/3 when the plan itself is refused.
    """
    if routing.plan_digest != (plan_digest or plan.digest()):
        raise HatpError("HATP-GW-7", "the routing record names another plan digest", path="$.routing.planDigest")
    totals, up_to = plan_money(plan).amounts()
    if up_to and routing.checked.status != "checked":
        raise HatpError(
            "HATP-GW-7",
            f"the plan moves money but the authority check says {routing.checked.status!r}; absent is never a pass",
            path="$.routing.checked.status",
            code="AUTHORITY_NOT_CHECKED",
        )
    if routing.checked.amounts != up_to or routing.up_to != up_to or routing.plan_totals != totals:
        raise HatpError(
            "HATP-GW-7",
            "the routing record's amounts differ from the plan's own totals",
            path="$.routing.checked.amounts",
            code="AUTHORITY_NOT_CHECKED",
        )

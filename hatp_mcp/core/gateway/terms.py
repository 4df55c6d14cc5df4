"""Approval terms: `hatp/txn/tighten` shrinks a pending ask's deadline and names the holds' end times, and the
person's proof, the Approval and the coordinator must all agree on them (spec/gateway.md HATP-GW-30..33,
spec/coordinator.md HATP-MODE-5..8). Pure: takes `now`, returns new records or raises HatpError.

Must not sign, persist or read a clock; the runtime (runtime/gateway/driver.py) re-signs the vote and stores the ask.
A refusal here can become the reason of a signed no vote (terms refused at routing), so its times are in words
without "(N min ago)" (HATP-GW-97): `2026-11-29 14:00 UTC`, never the wire's timestamp.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from hatp_mcp.core.gateway import machine as core
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Approval, HumanDecisionProof
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.terms import ApprovalTerms, HoldTerm
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.errors import HatpError

__all__ = ["check_approval_terms", "check_proof_terms", "check_sent_terms", "same_terms", "tighten"]


def same_terms(a: ApprovalTerms | None, b: ApprovalTerms | None) -> bool:
    """Equal as signed: the canonical wire forms (None only equals None)."""
    if a is None or b is None:
        return a is b
    return canonical(a.wire()) == canonical(b.wire())


def _hold_end(h: HoldTerm) -> datetime:
    """The latest a hold is promised to last: its horizon (renewals), else its lease."""
    return parse_ts(h.hold_horizon if h.hold_horizon is not None else h.lease_expires_at)


def _words(at: datetime) -> str:
    """A time as a refusal names it (HATP-GW-97): in words, and without "(N min ago)", as a signed vote keeps it."""
    return when_words(format_ts(at))


def _check_holds(rec: AskRecord, decide_by: datetime, holds: list[HoldTerm]) -> None:
    screen = rec.ask.screen
    hold_ids = {op.branch_id for op in screen.operations if op.tier == "hold"} if screen is not None else set()
    seen: set[str] = set()
    for i, h in enumerate(holds):
        path = f"$.holds[{i}]"
        if h.branch_id not in hold_ids or h.branch_id in seen:
            why = "named twice" if h.branch_id in seen else "not a hold branch of the plan"
            raise HatpError(
                "HATP-GW-31",
                f"hold {h.branch_id!r} is {why}",
                path=f"{path}.branchId",
                fix="name each placed hold branch of the plan once",
                code="BAD_TERMS",
            )
        seen.add(h.branch_id)
        if h.hold_horizon is not None and parse_ts(h.hold_horizon) < parse_ts(h.lease_expires_at):
            raise HatpError(
                "HATP-GW-31",
                f"hold {h.branch_id!r} has a horizon {when_words(h.hold_horizon)} before its lease end "
                f"{when_words(h.lease_expires_at)}",  # HATP-GW-97: kept in a signed vote, so no "(N min ago)"
                path=f"{path}.holdHorizon",
                code="BAD_TERMS",
            )
        if decide_by > _hold_end(h):
            raise HatpError(
                "HATP-GW-31",
                f"the deadline {_words(decide_by)} is after hold {h.branch_id!r} ends ({_words(_hold_end(h))})",
                path="$.decideBy",
                fix="give the approver a deadline that fits inside every hold",
                code="BAD_TERMS",
            )


def tighten(
    rec: AskRecord, decide_by: datetime, holds: list[HoldTerm], now: datetime, names: Mapping[str, str] | None = None
) -> AskRecord:
    """HATP-GW-30/31: the ask with deadline `decide_by` (never later than the one it has) and the terms
    {decideBy, holds} shown on its screen and bound into what the person signs. The same terms again return
    `rec` unchanged. Raises HatpError: HATP-GW-11 (the ask is closed), HATP-GW-30 (a later deadline; new terms
    after someone decided), HATP-GW-31 (a hold that is not a hold branch, named twice, or ends before the
    deadline). `names`: display names by address, for what time passing writes about people (HATP-GW-97)."""
    rec = core.tick(rec, now, names)
    core.transition(core.state_of(rec), core.Event.TIGHTEN)  # raises HATP-GW-11 when the ask is closed
    if rec.ask.kind != "approve" or rec.ask.txn_id is None or rec.tool_call is not None:
        raise HatpError("HATP-GW-30", "only a plan's approval ask has terms", path="$.requirementId", code="BAD_TERMS")
    current = parse_ts(rec.ask.decide_by)
    if decide_by > current:
        raise HatpError(
            "HATP-GW-30",
            f"the ask's deadline is {when_words(rec.ask.decide_by)}; tighten never extends it to {_words(decide_by)}",
            path="$.decideBy",
            fix="ask in a new transaction for more time",
            code="DEADLINE_EXTENDED",
        )
    _check_holds(rec, decide_by, holds)
    terms = ApprovalTerms(decide_by=format_ts(decide_by), holds=holds)
    if same_terms(terms, rec.ask.terms):
        return rec
    if rec.decisions:
        raise HatpError(
            "HATP-GW-30",
            f"{len(rec.decisions)} person(s) already decided under the terms they were shown; they stay fixed",
            path="$.holds",
            fix="abort and begin a new transaction, or keep the terms",
            code="TERMS_FIXED",
        )
    screen = rec.ask.screen
    if screen is not None:
        screen = screen.model_copy(update={"decide_by": terms.decide_by, "holds": list(holds) or None})
    ask = rec.ask.model_copy(update={"decide_by": terms.decide_by, "terms": terms, "screen": screen})
    return core.tick(rec.model_copy(update={"ask": ask}), now, names)


def check_proof_terms(proof: HumanDecisionProof, ask_terms: ApprovalTerms | None, path: str = "$.proof") -> None:
    """HATP-GW-32: a person's proof carries exactly the terms of the ask (none when it has none)."""
    if not same_terms(proof.terms, ask_terms):
        raise HatpError(
            "HATP-GW-32",
            "the proof was signed over other terms (deadline, holds) than the ask shows now",
            path=f"{path}.terms",
            fix="show the person the ask as it is now (its terms) and have them sign that",
            code="DECISION_NOT_PROVEN",
        )


def check_approval_terms(approval: Approval, path: str = "$") -> None:
    """HATP-GW-32 offline: every decision proof in `approval` carries the Approval's own terms."""
    for i, d in enumerate(approval.decisions):
        if d.proof is not None:
            check_proof_terms(d.proof, approval.terms, f"{path}.decisions[{i}].proof")


def check_sent_terms(approval: Approval, sent: ApprovalTerms | None, path: str = "$.approval") -> None:
    """HATP-MODE-8: an approving Approval carries exactly the terms the coordinator sent with tighten (and none
    when it sent none), and each person's proof carries them too. Raises HatpError HATP-MODE-8 (TERMS_MISMATCH)."""
    if approval.decision != "approve":
        return
    if not same_terms(approval.terms, sent):
        raise HatpError(
            "HATP-MODE-8",
            "the approval's terms are not the deadline and holds the coordinator sent",
            path=f"{path}.terms",
            fix="abort: the humans approved other terms than the ones the holds give",
            code="TERMS_MISMATCH",
        )
    try:
        check_approval_terms(approval, path)
    except HatpError as exc:
        raise HatpError("HATP-MODE-8", exc.reason, path=exc.path, code="TERMS_MISMATCH") from exc

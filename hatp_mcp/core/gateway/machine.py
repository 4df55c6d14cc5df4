"""The Human Gateway's state machine for one ask: routing, quorum, separation of duties, SLA escalation,
deadlines, and the evidence it leaves (vote, approval, answer). Pure: takes `now`, returns new records.

An AskRecord is immutable; every operation returns a new one or raises HatpError and leaves the old one as it
was. States and their transitions are the table TRANSITIONS. Signing is the caller's (runtime/gateway/driver.py); so is
persistence, and so are contact details, which this module never sees.

What it writes for people and models to read (a refusal, the reason a no vote carries, why a person is no longer
asked) names people and times as the gateway's other texts do (HATP-GW-97): a person by the display name on their
card with the address beside it (`names`, display names by address, as the callers have them from the signed
cards; screen.person_words), a time as `YYYY-MM-DD HH:MM UTC` (model/when.py when_words), with "(N min ago)" from `now`
in a refusal read at once, and without it in text kept in the record and signed into a vote, where it would go
stale. The structured fields (code, rule, state, seats' times) stay as the wire has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from hatp_mcp.core.gateway.address import parse_address
from hatp_mcp.core.gateway.ask_ids import approval_ask_id
from hatp_mcp.core.gateway.authority import check_requirement, plan_money
from hatp_mcp.core.gateway.directory import Criteria, Directory
from hatp_mcp.core.gateway.screen import person_words, render_screen
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Checked, HumanDecision, HumanDecisionProof, PasskeyAssertion
from hatp_mcp.core.model.gateway import Ask, AskRecord, Seat
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.when import when_words
from hatp_mcp.errors import HatpError

__all__ = [
    "TRANSITIONS",
    "AskState",
    "Event",
    "asked_seat",
    "decide",
    "decline",
    "next_wakeup",
    "open_approval",
    "open_routed",
    "refuse_if_closed",
    "route_seats",
    "state_of",
    "tick",
    "transition",
    "unreachable",
    "withdraw",
]


class AskState(Enum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    ANSWERED = "answered"
    EXPIRED = "expired"
    EXHAUSTED = "exhausted"
    WITHDRAWN = "withdrawn"


class Event(Enum):
    APPROVE = "approve"  # one approval, quorum not met yet
    QUORUM_MET = "quorum-met"
    REJECT = "reject"
    ANSWER = "answer"
    DECLINE = "decline"
    SLA_MISSED = "sla-missed"
    EXHAUSTED = "exhausted"
    DEADLINE = "deadline"
    WITHDRAW = "withdraw"
    TIGHTEN = "tighten"  # a shorter deadline and the holds' end times (core/gateway/terms.py, HATP-GW-30)
    UNREACHABLE = "unreachable"  # every delivery channel of an asked person failed (HATP-GW-61)


_P, _A, _R, _N = AskState.PENDING, AskState.APPROVED, AskState.REJECTED, AskState.ANSWERED
_X, _E, _W = AskState.EXPIRED, AskState.EXHAUSTED, AskState.WITHDRAWN
TRANSITIONS: dict[tuple[AskState, Event], AskState] = {
    (_P, Event.APPROVE): _P,
    (_P, Event.QUORUM_MET): _A,
    (_P, Event.REJECT): _R,
    (_P, Event.ANSWER): _N,
    (_P, Event.DECLINE): _P,
    (_P, Event.SLA_MISSED): _P,
    (_P, Event.EXHAUSTED): _E,
    (_P, Event.DEADLINE): _X,
    (_P, Event.WITHDRAW): _W,
    (_P, Event.TIGHTEN): _P,
    (_P, Event.UNREACHABLE): _P,
    # A transaction aborted after the humans decided: the decision stands, withdrawing is a no-op.
    **{(s, Event.WITHDRAW): s for s in (_A, _R, _N, _X, _E, _W)},
}


def state_of(rec: AskRecord) -> AskState:
    return AskState(rec.state)


def transition(state: AskState, event: Event) -> AskState:
    """The next state. Raises HatpError HATP-GW-11 for an event the table does not allow (the ask is closed)."""
    nxt = TRANSITIONS.get((state, event))
    if nxt is None:
        raise HatpError(
            "HATP-GW-11",
            f"the ask is {state.value}; {event.value!r} is not accepted any more",
            path="$.state",
            fix="ask again in a new transaction",
            code="ASK_CLOSED",
        )
    return nxt


def _person(address: str, names: Mapping[str, str] | None) -> str:
    """A person (or the address asked) as the machine's words name them (HATP-GW-97): screen.person_words."""
    if names:  # HATP-GW-97: the display name on their card with the address beside it, as the pages name people
        return person_words(address, names)
    return address


def _seat(seats: list[Seat], human: str) -> tuple[int, Seat] | None:
    for i, s in enumerate(seats):
        if s.human == human:
            return i, s
    return None


def route_seats(
    directory: Directory, address: str, criteria: Criteria, now: datetime, path: str = "$"
) -> tuple[list[Seat], tuple[int, int]]:
    """Resolve an address into seats (ranked eligible, their eligible delegates, then the excluded) and the quorum
    (M, N). Raises AddressError (HATP-ADDR-1..4)."""
    addr = parse_address(address, path)
    if not addr.is_human:
        raise HatpError(
            "HATP-ADDR-4",
            f"{address!r} is an agent; only humans approve or answer",
            path=path,
            fix="address a human://, role or pool",
            code="BAD_ADDRESS",
        )
    if addr.passkey:
        criteria = replace(criteria, require_passkey=True)
    res = directory.resolve(addr, criteria, now)
    names = directory.names()
    seats = [Seat(human=c.human, status="eligible", sla_seconds=c.card.sla.decide_seconds) for c in res.eligible]
    excluded = [Seat(human=e.human, status="excluded", rule=e.rule, detail=e.detail) for e in res.excluded]
    known = {s.human for s in seats} | {s.human for s in excluded}
    for c in res.eligible:
        for d in c.card.delegates:
            if d in known:
                continue
            known.add(d)
            card = directory.card(d)
            if card is None:
                excluded.append(
                    Seat(
                        human=d,
                        status="excluded",
                        rule="HATP-GW-10",
                        detail=f"delegate of {_person(c.human, names)}: no card",  # HATP-GW-97
                    )
                )
                continue
            why = directory.check(card, criteria)
            if why is not None:
                excluded.append(
                    Seat(
                        human=d,
                        status="excluded",
                        rule=why.rule,
                        detail=f"delegate of {_person(c.human, names)}: {why.detail}",  # HATP-GW-97
                    )
                )
            else:
                seats.append(
                    Seat(human=d, status="eligible", delegate_for=c.human, sla_seconds=card.sla.decide_seconds)
                )
    if addr.quorum is not None:
        quorum = addr.quorum
    else:
        quorum = (1, 1)
    return seats + excluded, quorum


def _ask_seat(seat: Seat, now: datetime) -> Seat:
    due = format_ts(now + timedelta(seconds=seat.sla_seconds)) if seat.sla_seconds is not None else None
    return seat.model_copy(update={"status": "asked", "asked_at": format_ts(now), "due_at": due})


def open_routed(
    ask: Ask,
    seats: list[Seat],
    quorum: tuple[int, int],
    checked: Checked,
    now: datetime,
    names: Mapping[str, str] | None = None,
) -> AskRecord:
    """Start an ask: the top N eligible seats (not delegates) are asked; when fewer than M are eligible the ask
    is exhausted at once (HATP-GW-15) and votes no, its reason naming the address as people are named (`names`,
    HATP-GW-97)."""
    need, of = quorum
    direct = [i for i, s in enumerate(seats) if s.status == "eligible" and s.delegate_for is None]
    seats = list(seats)
    for i in direct[:of]:
        seats[i] = _ask_seat(seats[i], now)
    rec = AskRecord(
        ask=ask, state=AskState.PENDING.value, quorum_required=need, quorum_of=of, checked=checked, seats=seats
    )
    if len(direct) < need:
        eligible, asked = len(direct), _person(ask.address, names)
        return rec.model_copy(
            update={
                "state": transition(AskState.PENDING, Event.EXHAUSTED).value,
                "closed_at": format_ts(now),
                "code": "NO_ELIGIBLE_APPROVER",
                "reason": f"HATP-GW-15: {eligible} eligible of the {need} needed for {asked}",
            }
        )
    return rec


def open_approval(
    plan: Plan,
    requirement_id: str,
    directory: Directory,
    *,
    gateway: str,
    now: datetime,
    default_window: timedelta = timedelta(hours=24),
    open_asks: Mapping[str, int] | None = None,
) -> AskRecord:
    """Route an approval requirement of `plan`, checking authority against the plan's own totals; `open_asks`,
    the asks the gateway has open for each person now, count toward their capacity and load (HATP-GW-9).

    Raises HatpError: HATP-GW-1 (requirement below the plan total), HATP-GW-2 (negative branch amount),
    HATP-GW-3 (negative tolerance), HATP-ADDR-1..4 (the address, or a chain link that is not a human's),
    HATP-GW-11 (unknown requirement).
    """
    idx = next((i for i, r in enumerate(plan.approvals) if r.id == requirement_id), None)
    if idx is None:
        raise HatpError(
            "HATP-GW-11",
            f"the plan has no approval requirement {requirement_id!r}",
            path="$.approvals",
            code="NO_SUCH_ASK",
        )
    req = plan.approvals[idx]
    path = f"approvals[{idx}]"
    money = plan_money(plan)
    check_requirement(req, money, path)
    totals, up_to = money.amounts()
    checked = (
        Checked(status="checked", action=req.action, amounts=up_to)
        if money.moves_money
        else Checked(status="absent", action=req.action)
    )
    bounds = [parse_ts(t) for t in (req.decide_by, plan.deadlines.decide_by) if t is not None]
    decide_by = min(bounds) if bounds else now + default_window
    criteria = Criteria(
        action=req.action,
        up_to=money.up_to,
        requester=plan.requester.principal,
        decide_by=decide_by,
        open_asks=dict(open_asks or {}),
    )
    seats, quorum = route_seats(directory, req.address, criteria, now, f"{path}.address")
    for j, link in enumerate(req.chain):  # HATP-ADDR-4: the chain is never routed, but only humans stand in it
        if not parse_address(link.address, f"{path}.chain[{j}].address").is_human:
            raise HatpError(
                "HATP-ADDR-4",
                f"{link.address!r} is an agent; only humans approve or answer",
                path=f"{path}.chain[{j}].address",
                fix="escalate to a human://, role or pool",
                code="BAD_ADDRESS",
            )
    ask = Ask(
        ask_id=approval_ask_id(plan.txn_id, req.id),
        kind="approve",
        txn_id=plan.txn_id,
        requirement_id=req.id,
        plan_digest=plan.digest(),
        address=req.address,
        requester=plan.requester.principal,
        screen=render_screen(plan, req, money, quorum),
        decide_by=format_ts(decide_by),
        gateway=gateway,
        issued_at=format_ts(now),
    )
    rec = open_routed(ask, seats, quorum, checked, now, directory.names())
    return rec.model_copy(update={"plan_totals": totals, "up_to": up_to})


def refuse_if_closed(rec: AskRecord, now: datetime, human: str, names: Mapping[str, str] | None = None) -> None:
    """Raises HatpError HATP-GW-12 for a decision at or after the signed deadline, naming the person and the times
    in words (HATP-GW-97)."""
    late = now >= parse_ts(rec.ask.decide_by) and state_of(rec) is AskState.PENDING
    if late or state_of(rec) is AskState.EXPIRED:
        who, at, deadline = _person(human, names), when_words(format_ts(now)), when_words(rec.ask.decide_by, now)
        raise HatpError(
            "HATP-GW-12",
            f"{who} decided at {at}, after the signed deadline {deadline}; the ask is withdrawn",
            path="$.decideBy",
            fix="the transaction votes no; the agent may propose a new plan",
            code="DEADLINE_PASSED",
        )


def asked_seat(rec: AskRecord, human: str, names: Mapping[str, str] | None = None) -> tuple[int, Seat]:
    """The seat of `human`, who must be asked now. Raises HatpError HATP-GW-6 (decided before), the exclusion's
    rule (excluded) or HATP-GW-14 (not asked), naming the person as HATP-GW-97 says."""
    found = _seat(rec.seats, human)
    who = _person(human, names)
    if found is not None and found[1].status == "asked":
        return found
    if found is not None and found[1].status == "decided":
        raise HatpError(
            "HATP-GW-6",
            f"{who} already decided this ask; quorum counts distinct people, once each",
            path="$.decisions",
            fix="ask another eligible person",
            code="ALREADY_DECIDED",
        )
    if found is not None and found[1].status == "excluded" and found[1].rule is not None:
        raise HatpError(
            found[1].rule,
            f"{who} may not decide this ask: {found[1].detail}",
            path="$.routing.humans",
            code="NOT_ELIGIBLE",
        )
    raise HatpError(
        "HATP-GW-14",
        f"{who} was not asked to decide this ask",
        path="$.routing.humans",
        fix="only a person the gateway asked may decide",
        code="NOT_ASKED",
    )


def decide(
    rec: AskRecord,
    human: str,
    decision: str,
    now: datetime,
    via: str = "inbox",
    proof: HumanDecisionProof | None = None,
    passkey: PasskeyAssertion | None = None,
    reason: str | None = None,
    names: Mapping[str, str] | None = None,
) -> AskRecord:
    """Record an approve/reject by an asked person. Any reject decides reject; M distinct approvals approve.
    `proof` is the person's verified signed decision (core/gateway/proof.py), or `passkey` their verified passkey
    assertion (core/gateway/passkey.py), kept in the HumanDecision; `reason`, the words the proof signs
    (HATP-GW-87), kept beside it; `names`, display names by address for the refusals' words (HATP-GW-97).

    Raises HatpError: HATP-GW-12 (after the deadline), HATP-GW-6 (a second decision by the same person),
    HATP-GW-5/4/8/9/10 (the person was excluded, for that rule), HATP-GW-14 (not asked), HATP-GW-11 (closed),
    HATP-ASK-6 (approve/reject on a question ask).
    """
    if rec.ask.kind != "approve":
        raise HatpError(
            "HATP-ASK-6",
            f"ask {rec.ask.ask_id} is a {rec.ask.kind} question; answer it",
            path="$.kind",
            code="WRONG_KIND",
        )
    if decision not in ("approve", "reject"):
        raise HatpError("HATP-ASK-6", f"decision {decision!r} is neither approve nor reject", path="$.decision")
    refuse_if_closed(rec, now, human, names)
    transition(state_of(rec), Event.APPROVE)  # raises HATP-GW-11 when the ask is closed
    i, seat = asked_seat(rec, human, names)
    approvals = sum(1 for d in rec.decisions if d.decision == "approve") + (decision == "approve")
    if decision == "reject":
        event = Event.REJECT
    else:
        event = Event.QUORUM_MET if approvals >= rec.quorum_required else Event.APPROVE
    state = transition(state_of(rec), event)
    seats = list(rec.seats)
    seats[i] = seat.model_copy(
        update={"status": "decided", "decision": decision, "decided_at": format_ts(now), "via": via}
    )
    hd = HumanDecision(
        approver=human,
        decision=decision,  # type: ignore[arg-type]
        decided_at=format_ts(now),
        via=via,
        proof=proof,
        passkey=passkey,
        reason=reason,
    )
    update: dict[str, Any] = {"state": state.value, "seats": seats, "decisions": [*rec.decisions, hd]}
    if state is not AskState.PENDING:
        update["closed_at"] = format_ts(now)
    return rec.model_copy(update=update)


def _replace(rec: AskRecord, seats: list[Seat], gone: str, now: datetime) -> tuple[list[Seat], bool]:
    """Ask the next person in place of `gone`: their first eligible delegate, else the next ranked eligible."""
    order = [i for i, s in enumerate(seats) if s.status == "eligible" and s.delegate_for == gone]
    order += [i for i, s in enumerate(seats) if s.status == "eligible" and s.delegate_for is None]
    order += [i for i, s in enumerate(seats) if s.status == "eligible" and s.delegate_for not in (None, gone)]
    if not order:
        return seats, False
    seats[order[0]] = _ask_seat(seats[order[0]], now)
    return seats, True


# Why the last person asked is gone, in words for the reason a no vote carries (HATP-GW-97).
_LOSS_WORDS = {
    Event.DECLINE: "passed it on",
    Event.SLA_MISSED: "did not decide in their time",
    Event.UNREACHABLE: "could not be reached",
}


def _after_loss(
    rec: AskRecord, seats: list[Seat], event: Event, now: datetime, loser: str, names: Mapping[str, str] | None
) -> AskRecord:
    seats, found = _replace(rec, seats, loser, now)
    state = transition(state_of(rec), event)
    still_asked = sum(1 for s in seats if s.status == "asked")
    approvals = sum(1 for d in rec.decisions if d.decision == "approve")
    update: dict[str, Any] = {"state": state.value, "seats": seats}
    if not found and approvals + still_asked < rec.quorum_required:
        update["state"] = transition(state, Event.EXHAUSTED).value
        update["closed_at"] = format_ts(now)
        update["code"] = "NO_ELIGIBLE_APPROVER"
        gone = f"{_person(loser, names)} {_LOSS_WORDS.get(event, event.value)}"
        update["reason"] = f"HATP-GW-15: no eligible person left after {gone}"
    return rec.model_copy(update=update)


def decline(rec: AskRecord, human: str, now: datetime, names: Mapping[str, str] | None = None) -> AskRecord:
    """An asked person passes: they are marked declined and the next eligible person is asked (HATP-ASK-5).
    `names`: display names by address, for what is written about people (HATP-GW-97)."""
    refuse_if_closed(rec, now, human, names)
    transition(state_of(rec), Event.DECLINE)
    i, seat = asked_seat(rec, human, names)
    seats = list(rec.seats)
    seats[i] = seat.model_copy(
        update={
            "status": "excluded",
            "rule": "HATP-ASK-5",
            "detail": "declined: passed the ask on",
            "decision": "decline",
            "decided_at": format_ts(now),
        }
    )
    return _after_loss(rec, seats, Event.DECLINE, now, human, names)


def unreachable(
    rec: AskRecord, human: str, now: datetime, detail: str, names: Mapping[str, str] | None = None
) -> AskRecord:
    """HATP-GW-61: an asked person no channel could reach is treated as unavailable: excluded with the rule and
    `detail` (which channels failed; never an address), and the next person is asked as after a decline. A
    person who is not (or no longer) asked, or an ask that is closed, is left as it is. `names`: as for `decline`."""
    if state_of(rec) is not AskState.PENDING:
        return rec
    found = _seat(rec.seats, human)
    if found is None or found[1].status != "asked":
        return rec
    i, seat = found
    seats = list(rec.seats)
    seats[i] = seat.model_copy(update={"status": "excluded", "rule": "HATP-GW-61", "detail": detail[:500]})
    return _after_loss(rec, seats, Event.UNREACHABLE, now, human, names)


def tick(rec: AskRecord, now: datetime, names: Mapping[str, str] | None = None) -> AskRecord:
    """Let time pass: at the deadline the ask is withdrawn and votes no (HATP-GW-12); an asked person whose SLA
    ran out is replaced by a delegate or the next eligible person (HATP-GW-10). Returns `rec` when nothing is due.
    `names`: as for `decline`."""
    if state_of(rec) is not AskState.PENDING:
        return rec
    if now >= parse_ts(rec.ask.decide_by):
        deadline = when_words(rec.ask.decide_by)  # HATP-GW-97: kept and signed, so without "(N min ago)"
        return rec.model_copy(
            update={
                "state": transition(AskState.PENDING, Event.DEADLINE).value,
                "closed_at": format_ts(now),
                "code": "DEADLINE_PASSED",
                "reason": f"HATP-GW-12: no decision by the signed deadline {deadline}; asks withdrawn",
            }
        )
    for s in rec.seats:
        if s.status == "asked" and s.due_at is not None and now >= parse_ts(s.due_at):
            i = rec.seats.index(s)
            seats = list(rec.seats)
            seats[i] = s.model_copy(
                update={
                    "status": "excluded",
                    "rule": "HATP-GW-10",
                    "detail": f"sla-missed: no decision by {when_words(s.due_at)}",  # HATP-GW-97
                }
            )
            return tick(_after_loss(rec, seats, Event.SLA_MISSED, now, s.human, names), now, names)
    return rec


def withdraw(rec: AskRecord, now: datetime) -> AskRecord:
    """The transaction was aborted: cancel the ask (a decided ask keeps its decision)."""
    state = transition(state_of(rec), Event.WITHDRAW)
    if state is state_of(rec):
        return rec
    return rec.model_copy(
        update={"state": state.value, "closed_at": format_ts(now), "code": "WITHDRAWN", "reason": "transaction aborted"}
    )


def next_wakeup(rec: AskRecord) -> datetime | None:
    """When `tick` next has work: the earliest SLA due among asked people, or the deadline. None when closed."""
    if state_of(rec) is not AskState.PENDING:
        return None
    times = [parse_ts(s.due_at) for s in rec.seats if s.status == "asked" and s.due_at is not None]
    return min([parse_ts(rec.ask.decide_by), *times])

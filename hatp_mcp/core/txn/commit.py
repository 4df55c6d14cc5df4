"""Carrying out a commit decision: commit branch by branch in commit order after renewing the short leases
(HATP-TXN-9), a commit in doubt (HATP-TXN-10) with its retries and escalation, and the recovery offered when
something cannot follow the irreversible step. Pure: takes the machine's data and `now`, returns commands; reads
no clock, does no IO.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.record import DECIDED_EVENT
from hatp_mcp.core.txn.abort import finish, offer_recovery
from hatp_mcp.core.txn.data import Txn, arm
from hatp_mcp.core.txn.deadlines import renew
from hatp_mcp.core.txn.events import (
    Command,
    Decide,
    Escalate,
    Outcome,
    Record,
    SendCommit,
    SendPrepare,
    Step,
    TxnState,
)

__all__ = [
    "decide_commit",
    "escalate",
    "in_doubt",
    "irreversible_done",
    "next_commit",
    "outcome_decided",
    "resolved",
]

T = TxnState


def irreversible_done(t: Txn) -> bool:
    """Something that cannot be undone has committed, so from now on nothing is undone: the final branch, or a hold
    (a booked hold has no undo). Holds commit after the final branch, so in a plan with one this is the final's
    commit; in a plan of holds only it is the first hold's, and a later hold refused after it is recovery offered
    to a person (NEEDS_RECOVERY), never an abort that would claim the booked hold was released (HATP-TXN-6)."""
    return any(t.branches[b].tier in ("final", "hold") for b in t.phase2.committed)


def decide_commit(t: Txn, now: datetime) -> list[Command]:
    t.phase2.decision = "commit"
    t.timers.clear()
    t.fire(Step.DECIDED_COMMIT)
    return [Decide(decision="commit", reason="every branch and every approver voted yes"), *next_commit(t, now)]


def next_commit(t: Txn, now: datetime) -> list[Command]:
    """Commit the next branch in order, after checking and renewing every short lease (HATP-TXN-9)."""
    p, h = t.phase2, t.holds
    if p.step is not None or h.renewing or p.holds_out:
        return []
    if p.holds_refused:  # every hold commit sent together has answered; some were refused after the final
        refused, p.holds_refused = p.holds_refused, []
        return offer_recovery(t, refused, now) + finish(t, Outcome.NEEDS_RECOVERY)
    remaining = [b for b in t.order if b not in p.committed and b not in h.lapsed]
    if not remaining:
        return finish(t, Outcome.NEEDS_RECOVERY if h.lapsed else Outcome.COMMITTED)
    durations = [t.branches[b].max_duration_seconds for b in remaining]
    need = float(t.config.renew_before_seconds)
    if all(x is not None for x in durations):
        need = max(need, float(sum(x or 0 for x in durations)))
    out: list[Command] = []
    for b in remaining:
        if t.branches[b].tier != "hold" or b in h.no_renew:
            continue
        expires = h.leases.get(b)
        if expires is not None and now >= expires:
            if irreversible_done(t):
                h.lapsed.add(b)
                out.append(Record(event="hold.lapsed", body={"branchId": b}))
                continue
            h.lost.add(b)
            h.renewing.add(b)
            out += [Record(event="hold.lost", body={"branchId": b}), SendPrepare(branch_id=b)]
        elif expires is None or (expires <= now + timedelta(seconds=need) and expires < h.horizons.get(b, expires)):
            out.append(renew(t, b))
    if h.renewing:
        return out
    if not [b for b in remaining if b not in h.lapsed]:
        return out + next_commit(t, now)
    live = [b for b in remaining if b not in h.lapsed]
    out += outcome_decided(t, live)
    if irreversible_done(t) and all(t.branches[b].tier == "hold" for b in live):
        # After the final branch only holds are left; nothing depends on their order, so they commit together.
        p.holds_out = set(live)
        return [*out, *(SendCommit(branch_id=b, preconditions=t.phase1.preconditions.get(b, {})) for b in live)]
    step = live[0]
    p.step = step
    return [*out, SendCommit(branch_id=step, preconditions=t.phase1.preconditions.get(step, {}))]


def outcome_decided(t: Txn, confirming: list[str]) -> list[Command]:
    """HATP-TXN-25: once the commit decision is durable and the irreversible step has committed, with no hold
    lapsed or refused, the outcome can no longer change: say so in the record (once), naming the holds still being
    committed, so the agent is told COMMITTED before they answer (HATP-MCP-65). The driver writes this event
    before the holds' commits are sent."""
    p, h = t.phase2, t.holds
    if p.answered or p.decision != "commit" or not irreversible_done(t) or h.lapsed or p.holds_refused:  # HATP-TXN-25
        return []
    p.answered = True
    body = {"outcome": Outcome.COMMITTED.value, "confirming": list(confirming)}
    return [Record(event=DECIDED_EVENT, body=body)]


def in_doubt(t: Txn, bid: str, now: datetime) -> list[Command]:
    """Neither failed nor succeeded: keep holds alive, retry the idempotent commit, escalate (HATP-TXN-10)."""
    p, h = t.phase2, t.holds
    out: list[Command] = []
    if t.state is not T.IN_DOUBT:
        out.append(Record(event="commit.in-doubt", body={"branchId": bid}))
    t.fire(Step.COMMIT_IN_DOUBT)
    p.doubt = bid
    out += arm(t, f"retry:{bid}", now + timedelta(seconds=t.config.retry_seconds))
    for b, expires in h.leases.items():
        if b not in p.committed and expires < h.horizons.get(b, expires) and f"renew:{b}" not in t.timers:
            margin = min(timedelta(seconds=t.config.renew_before_seconds), max(expires - now, timedelta(0)) / 2)
            out += arm(t, f"renew:{b}", max(now, expires - margin))
    if not p.escalated and "escalate" not in t.timers:
        lead = timedelta(seconds=t.plan.escalation.lead_seconds if t.plan.escalation else 0)
        live = [h.horizons[b] for b in h.horizons if b not in p.committed]
        at = min(live) - lead if live else now
        if at <= now:
            out += escalate(t, now)
        else:
            out += arm(t, "escalate", at)
    return out


def escalate(t: Txn, now: datetime) -> list[Command]:
    p, h = t.phase2, t.holds
    p.escalated = True
    to = t.plan.escalation.to if t.plan.escalation else t.plan.requester.principal
    live = [h.horizons[b] for b in h.horizons if b not in p.committed]
    body: dict[str, Any] = {"to": to, "branchId": p.doubt}
    if live:
        body["firstHoldHorizon"] = format_ts(min(live))
    reason = f"commit of {p.doubt} is in doubt; the holds end at {body.get('firstHoldHorizon', 'once')}"
    return [Record(event="escalated", body=body), Escalate(to=to, reason=reason)]


def resolved(t: Txn, bid: str, answer: str, now: datetime) -> list[Command]:
    p, h = t.phase2, t.holds
    p.doubt = None
    holds = [b for b in t.order if t.branches[b].tier == "hold" and b not in p.committed]
    live = [b for b in holds if b not in h.lapsed and h.leases.get(b, now) > now]
    lapsed = [b for b in holds if b not in live]
    out: list[Command] = [
        Record(
            event="in-doubt.resolved",
            body={"branchId": bid, "answer": answer, "holdsLive": live, "holdsLapsed": lapsed},
        )
    ]
    if answer == "yes" and lapsed:
        h.lapsed.update(lapsed)
        out += offer_recovery(t, lapsed, now)
    return out

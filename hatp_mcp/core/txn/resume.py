"""A replacement coordinator takes up a transaction its record shows waiting only for a human (HATP-TXN-22).

Without a logged decision a replacement presumes abort (HATP-TXN-12), with one exception: the record shows that
every branch voted yes and is prepared (a signed yes vote and an ok prepare receipt, not lost since), in a mode
that places the holds before or while the humans are asked (parallel, holds-first), and that at least one ask is
open at the gateway (its signed pending vote, with its decideBy), none refused. Everything the old coordinator was
still to do then is to wait for the gateway's vote, and the gateway keeps its asks durably: the replacement
re-attaches to them (a poll, then the long poll) and waits, bounded as before by the approval deadline (the plan's,
each requirement's, the gateway's signed decideBy, what the holds' horizons and commitBy leave) and the holds'
leases, which it renews again. A lease or horizon that ended while no coordinator ran (HATP-TXN-23), or an
approval deadline that passed, aborts with that reason; nothing is guessed. Anything else (a prepare or a quote
still out, an approval-first transaction, a refused vote, a call that failed) still presumes abort.

`approving_point` reads the record; `resume_approving` starts the machine from it. Pure: no IO, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.txn.data import Approving, Txn, arm
from hatp_mcp.core.txn.deadlines import set_deadline
from hatp_mcp.core.txn.events import Command, Poll, Record, Step, TxnState

__all__ = ["RESUMABLE_MODES", "Approving", "approving_point", "lapsed_hold", "resume_approving"]

# The modes whose holds are placed before the human's yes can end the transaction: the ask waits on placed holds.
RESUMABLE_MODES = frozenset({"parallel", "holds-first"})
# What the record may not hold for the transaction to be taken up: each means the old coordinator was about to
# abort, or had stopped waiting.
_STOPPERS = frozenset(
    {
        "decision",
        "abort.requested",
        "approval.timeout",
        "vote.timeout",
        "vote.refused",
        "evidence.refused",
        "approval.withdrawn",
        "close.refused",
        "record.closed",
    }
)
_PHASE1_CALLS = frozenset({"prepare", "quote", "approval"})


def approving_point(plan: Plan, events: Sequence[Mapping[str, Any]]) -> Approving | str:
    """The open asks when the record (`events`, oldest first, without a decision) shows the transaction waiting
    only for its humans; otherwise why not, in a sentence (the replacement then presumes abort)."""
    begin = next((e for e in events if e.get("event") == "txn.begin"), None)
    mode = (begin or {}).get("body", {}).get("mode")
    if mode not in RESUMABLE_MODES:
        return f"mode {mode}: the humans are not asked on placed holds"
    if not plan.approvals:
        return "the plan asks no human"
    branches = {b.branch_id for b in plan.branches}
    requirements = {r.id for r in plan.approvals}
    voted: dict[str, object] = {}
    placed: dict[str, bool] = {}
    asks: dict[str, Mapping[str, Any]] = {}
    for ev in events:
        name = ev.get("event")
        body = ev.get("body") or {}
        evidence = ev.get("evidence") or {}
        about = body.get("branchId")
        if name in _STOPPERS:
            return f"the record holds {name}"
        if name == "call.failed" and body.get("phase") in _PHASE1_CALLS:
            return f"{about}'s {body.get('phase')} call failed"
        if name == "vote" and about in branches:
            voted[about] = evidence.get("decision")
        elif name == "vote" and about in requirements:
            asks[about] = evidence
        elif name == "receipt" and about in branches:
            placed[about] = evidence.get("phase") == "prepare" and evidence.get("outcome") == "ok"
        elif name in ("hold.lost", "hold.lapsed") and about in branches:
            placed[about] = False
    for b in plan.branches:
        if voted.get(b.branch_id) != "yes" or not placed.get(b.branch_id):
            return f"{b.branch_id} is not prepared"
    pending: dict[str, datetime] = {}
    for rid in sorted(requirements):
        vote = asks.get(rid) or {}
        if vote.get("decision") == "yes":
            continue
        if vote.get("decision") != "pending":
            return f"approval {rid} has no open ask at the gateway"
        try:
            pending[rid] = parse_ts(str(vote.get("decideBy")))
        except ValueError:
            return f"approval {rid}'s pending vote has no decideBy"
    if not pending:
        return "no ask is open"
    return Approving(pending)


def lapsed_hold(t: Txn, now: datetime) -> tuple[str, str] | None:
    """HATP-TXN-23: (code, reason) for the first hold whose lease or horizon ended by `now`, as the replayed
    receipts state them; None when every hold still stands. The reason is journaled, so its time has no countdown
    (HATP-GW-97)."""
    h = t.holds
    for b in sorted(h.leases):
        if now >= h.leases[b]:  # HATP-TXN-23: the participant may have released it
            return "LEASE_EXPIRED", f"{b}'s lease ended at {when_words(h.leases[b])} while no coordinator ran"
    for b in sorted(h.horizons):
        if now >= h.horizons[b]:  # HATP-TXN-23: no renewal keeps it past its horizon
            return "HORIZON_PASSED", f"{b}'s hold horizon ended at {when_words(h.horizons[b])}"
    return None


def resume_approving(t: Txn, point: Approving, now: datetime) -> list[Command]:
    """HATP-TXN-22: wait again for the open asks (one poll each, which re-attaches to the gateway's durable ask),
    with the holds' renewals armed and the approval deadline set again; call only when `lapsed_hold` is None."""
    h, a = t.holds, t.approvals
    out: list[Command] = [
        Record(event="coordinator.recovered", body={"decision": "resumed", "phase": "approving"}),
    ]
    t.fire(Step.RESUMED_APPROVING)
    for b in t.branches:
        t.phase1.votes[b] = "yes"
    a.asked = True
    a.terms_sent.update(a.terms)  # the terms the gateway accepted were sent: not sent again
    for rid, decide_by in point.pending.items():
        a.status[rid] = "pending"
        a.gw_deadline[rid] = decide_by
    for b in sorted(h.leases):
        expires = h.leases[b]
        if expires < h.horizons.get(b, expires):
            margin = min(timedelta(seconds=t.config.renew_before_seconds), (expires - now) / 2)
            out += arm(t, f"renew:{b}", expires - margin)
    out += set_deadline(t, now, min(point.pending.values()), "resumed")
    if t.state is not TxnState.APPROVING:  # the approval deadline passed while no coordinator ran
        return out
    return out + [Poll(requirement_id=rid) for rid in sorted(point.pending)]

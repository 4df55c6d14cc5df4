"""What each timer does when it fires: renew a lease, poll a pending approval, time the approval out, retry an
in-doubt commit, escalate, ask a pending participant again, retry a failed undo. A timer fired with another time
than the one armed was re-armed or cancelled since, and does nothing. Pure: takes the machine's data and `now`,
returns commands; reads no clock, does no IO.
"""

from __future__ import annotations

from datetime import datetime

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.txn.abort import abort, next_abort
from hatp_mcp.core.txn.commit import escalate
from hatp_mcp.core.txn.data import Txn
from hatp_mcp.core.txn.deadlines import DECIDING, renew
from hatp_mcp.core.txn.events import Command, Poll, Record, SendCommit, SendPrepare, Timer, TxnState

__all__ = ["on_timer"]

T = TxnState


def on_timer(t: Txn, ev: Timer, now: datetime) -> list[Command]:
    p1 = t.phase1
    if t.timers.get(ev.key) != ev.at:
        return []  # re-armed or cancelled since: stale
    del t.timers[ev.key]
    kind, _, arg = ev.key.partition(":")
    if kind == "renew" and t.state in DECIDING | {T.IN_DOUBT} and arg not in t.phase2.committed:
        return [renew(t, arg)]
    if kind == "poll" and t.approvals.status.get(arg) == "pending" and t.state in DECIDING:
        return [Poll(requirement_id=arg)]
    if kind == "deadline" and t.state in DECIDING:
        if any(t.approvals.status.get(r.id) != "yes" for r in t.plan.approvals):
            return [
                Record(event="approval.timeout", body={"decideBy": format_ts(ev.at)}),
                *abort(t, now, "APPROVAL_TIMEOUT", "no decision by the approval deadline"),
            ]
    if kind == "retry" and t.state is T.IN_DOUBT and arg == t.phase2.doubt:
        out: list[Command] = [Record(event="commit.retry", body={"branchId": arg})]
        out.append(SendCommit(branch_id=arg, preconditions=p1.preconditions.get(arg, {})))
        return out
    if kind == "escalate" and t.state is T.IN_DOUBT and not t.phase2.escalated:
        return escalate(t, now)
    if kind == "reprepare" and t.state in DECIDING and p1.votes.get(arg) == "pending":
        p1.inflight.add(arg)
        quote = p1.pending_phase.get(arg) == "quote"
        if quote:
            p1.quoting.add(arg)
        return [SendPrepare(branch_id=arg, quote_only=quote)]
    if kind == "undo" and t.state is T.ABORTING:
        return next_abort(t, now)
    return []

"""Deciding abort and carrying it out: withdraw the asks, release the holds and undo what ran, in reverse commit
order, one call at a time; the recovery offered for what cannot be settled, and how a transaction finishes. Pure:
takes the machine's data and `now`, returns commands; reads no clock, does no IO.
"""

from __future__ import annotations

from datetime import datetime

from hatp_mcp.core.txn.data import Txn
from hatp_mcp.core.txn.events import (
    Command,
    Decide,
    Finish,
    Outcome,
    Record,
    SendAbort,
    SendCompensate,
    Step,
    TxnState,
    Withdraw,
)
from hatp_mcp.core.txn.timing import abort_order

__all__ = ["abort", "finish", "next_abort", "offer_recovery", "queue_abort"]

T = TxnState
_FINISHED = {
    Outcome.COMMITTED: Step.FINISHED_COMMITTED,
    Outcome.ABORTED: Step.FINISHED_ABORTED,
    Outcome.NEEDS_RECOVERY: Step.FINISHED_NEEDS_RECOVERY,
}


def finish(t: Txn, outcome: Outcome) -> list[Command]:
    t.fire(_FINISHED[outcome])
    t.timers.clear()
    return [Finish(outcome=outcome)]


def abort(t: Txn, now: datetime, code: str, reason: str, *, log: bool = True) -> list[Command]:
    """Decide abort (durably), withdraw the asks, then release and undo in reverse commit order."""
    p = t.phase2
    if t.state is T.ABORTING:
        return []
    t.fire(Step.DECIDED_ABORT)
    p.decision = "abort"
    t.timers.clear()
    p.doubt = None
    out: list[Command] = [Decide(decision="abort", reason=f"{code}: {reason}")] if log else []
    for r in t.plan.approvals:
        if t.approvals.status.get(r.id) in ("asked", "pending"):  # HATP-TXN-17: recorded, then withdrawn
            out.append(Record(event="approval.withdrawn", body={"requirementId": r.id, "reason": code}))
            out.append(Withdraw(requirement_id=r.id))
    p.abort_queue = []
    for b in abort_order(t.plan):
        if b in p.undone:
            continue
        if b in p.committed:
            if t.branches[b].tier == "compensate":
                p.abort_queue.append(("compensate", b))
        elif t.phase1.votes.get(b) != "no" or b in t.phase1.inflight or b in t.holds.lost:
            p.abort_queue.append(("abort", b))
    return out + next_abort(t, now)


def queue_abort(t: Txn, bid: str, now: datetime) -> list[Command]:
    """Already aborting: release `bid` too (a late answer, or evidence that cannot be counted)."""
    p = t.phase2
    if bid not in p.undone and p.step != bid and ("abort", bid) not in p.abort_queue:
        p.abort_queue.append(("abort", bid))
    return next_abort(t, now)


def next_abort(t: Txn, now: datetime) -> list[Command]:
    p = t.phase2
    if p.step is not None:
        return []
    while p.abort_queue:
        phase, bid = p.abort_queue.pop(0)
        if bid in p.undone:
            continue
        p.step = bid
        if phase == "compensate":
            return [SendCompensate(branch_id=bid, undo_token=p.committed.get(bid))]
        return [SendAbort(branch_id=bid, reason="the transaction aborted")]
    if "undo" in t.timers:
        return []
    return finish(t, Outcome.NEEDS_RECOVERY if p.undo_failed else Outcome.ABORTED)


def offer_recovery(t: Txn, branches: list[str], now: datetime) -> list[Command]:
    """Offered, never performed: a linked transaction, or the participant's own void."""
    reauth = t.plan.recovery.off_session_reauth.wire() if t.plan.recovery is not None else {"consented": False}
    body = {
        "branches": branches,
        "options": ["linked-transaction", "participant-void"],
        "offSessionReauth": reauth,
        "performed": False,
    }
    return [Record(event="recovery.offered", body=body)]

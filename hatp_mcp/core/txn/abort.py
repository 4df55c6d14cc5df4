"""Deciding abort and carrying it out: withdraw the asks, release the holds and undo what ran, in reverse commit
order, one call at a time, sending an undo in doubt again within its bound (HATP-TXN-30/31); the recovery offered
for what could not be settled, and how a transaction finishes. Pure: takes the machine's data and `now`, returns
commands; reads no clock, does no IO.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hatp_mcp.core.txn.data import Txn, arm
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

__all__ = ["abort", "finish", "next_abort", "offer_recovery", "queue_abort", "undo_in_doubt"]

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
        if b in p.undone or b in p.undo_unresolved:  # a replacement: what its predecessor offered stays offered
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
        if bid in p.undone or bid in p.undo_unresolved:
            continue
        p.step = bid
        if phase == "compensate":
            return [SendCompensate(branch_id=bid, undo_token=p.committed.get(bid))]
        return [SendAbort(branch_id=bid, reason="the transaction aborted")]
    if "undo" in t.timers:
        return []
    unresolved = [b for b in p.undo_unresolved if b not in p.undone]  # a late ok settles one
    if unresolved:  # HATP-TXN-31: never ABORTED while an undo may not have happened
        return offer_recovery(t, unresolved, now) + finish(t, Outcome.NEEDS_RECOVERY)
    return finish(t, Outcome.NEEDS_RECOVERY if p.undo_failed else Outcome.ABORTED)


def undo_in_doubt(t: Txn, bid: str, now: datetime) -> list[Command]:
    """`bid`'s undo (abort or compensate) ended in doubt: an in-doubt receipt, or no answer. It is neither undone
    nor failed, and it is idempotent (HATP-PART-6, HATP-PART-12), so it is sent again in `retry_seconds`
    (HATP-TXN-30), before the rest of the queue (the reverse commit order holds), at most `undo_attempts` times in
    all: counted from the record, so a replacement coordinator does not start the count again. At the bound it is
    recorded as in doubt (`undo.in-doubt`), the rest of the abort goes on, and the end offers it for recovery
    (HATP-TXN-31)."""
    p = t.phase2
    phase = "compensate" if bid in p.committed else "abort"
    p.undo_doubts[bid] = sent = p.undo_doubts.get(bid, 0) + 1
    if sent >= t.config.undo_attempts:  # HATP-TXN-31: bounded; then offered for recovery, never said undone
        p.undo_unresolved.append(bid)
        said = Record(event="undo.in-doubt", body={"branchId": bid, "phase": phase, "attempts": sent})
        return [said, *next_abort(t, now)]
    if (phase, bid) not in p.abort_queue:
        p.abort_queue.insert(0, (phase, bid))
    return arm(t, "undo", now + timedelta(seconds=t.config.retry_seconds))


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

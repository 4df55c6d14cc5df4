"""Phase 2's answers: what a renew, commit, abort or compensate receipt does, what a failed call does, and how a
replacement coordinator starts from its logged decision (HATP-TXN-11). The commit and abort paths themselves are
hatp_mcp.core.txn.commit and hatp_mcp.core.txn.abort. Pure: takes the machine's data and `now`, returns
commands; reads no clock, does no IO.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hatp_mcp.core.txn.abort import abort, next_abort, queue_abort, undo_in_doubt
from hatp_mcp.core.txn.commit import in_doubt, irreversible_done, next_commit, resolved
from hatp_mcp.core.txn.data import Txn, arm, refused
from hatp_mcp.core.txn.deadlines import DECIDING, note_lease
from hatp_mcp.core.txn.events import CallFailed, Command, ReceiptAnswer, Record, SendPrepare, Step, TxnState
from hatp_mcp.core.txn.evidence_checks import check_branch_receipt
from hatp_mcp.core.txn.resume import Approving, lapsed_hold, resume_approving
from hatp_mcp.errors import HatpError

__all__ = ["on_failed", "on_receipt", "start_recovered"]

T = TxnState


def on_receipt(t: Txn, ev: ReceiptAnswer, now: datetime) -> list[Command]:
    p1, h, p = t.phase1, t.holds, t.phase2
    b = t.branches.get(ev.branch_id)
    if b is None:
        raise HatpError("HATP-TXN-2", f"no branch {ev.branch_id!r} in this plan", code="BAD_EVIDENCE")
    phase = str(ev.receipt.get("phase", "commit"))
    try:
        receipt = check_branch_receipt(
            t.plan, t.plan_digest, b, ev.receipt, t.keyring, {"renew", "commit", "abort", "compensate"}
        )
    except HatpError as exc:
        failed = CallFailed(branch_id=b.branch_id, phase=phase, reason=exc.reason)
        return [refused(b.branch_id, exc), *on_failed(t, failed, now)]
    out: list[Command] = [
        Record(event=receipt.phase, body={"branchId": b.branch_id}, evidence=ev.receipt, author=b.participant)
    ]
    bid = b.branch_id
    if receipt.phase == "renew":
        h.renewing.discard(bid)
        if t.state is T.ABORTING:  # being released anyway: never placed again
            return out
        if receipt.outcome == "ok":
            out += note_lease(t, bid, receipt, now)
        elif t.state in (T.IN_DOUBT,) or irreversible_done(t):
            h.lapsed.add(bid)
            out.append(Record(event="hold.lapsed", body={"branchId": bid}))
        else:  # lost: place it again, without asking the human again (HATP-TXN-8)
            h.lost.add(bid)
            h.leases.pop(bid, None)
            p1.inflight.add(bid)
            if t.state is T.COMMITTING:
                h.renewing.add(bid)
            out += [Record(event="hold.lost", body={"branchId": bid}), SendPrepare(branch_id=bid)]
        if t.state is T.COMMITTING:
            out += next_commit(t, now)
        return out
    if receipt.phase == "commit":
        if p.step == bid:
            p.step = None
        p.holds_out.discard(bid)
        if receipt.outcome == "in-doubt":
            return out + in_doubt(t, bid, now)
        resolving = t.state is T.IN_DOUBT and p.doubt == bid
        if receipt.outcome == "ok":
            p.committed[bid] = receipt.undo_token
            if resolving:
                out += resolved(t, bid, "yes", now)
                t.fire(Step.DOUBT_RESOLVED)
            if t.state is T.IN_DOUBT:  # another hold of the same step is in doubt: its answer decides what next
                return out
            return out + next_commit(t, now)
        if resolving:
            out += resolved(t, bid, "no", now)
        if not irreversible_done(t):  # undo what ran, release the holds; never retry with new values (HATP-TXN-6)
            return out + abort(t, now, receipt.code or "COMMIT_REFUSED", f"{bid} refused its commit")
        # After the irreversible step nothing is undone: recovery is offered for the refused holds once every
        # hold commit that is out has answered (next_commit), and the outcome is NEEDS_RECOVERY.
        p.holds_refused.append(bid)
        if t.state is T.IN_DOUBT and not resolving:
            return out
        if resolving:
            t.fire(Step.DOUBT_RESOLVED)
        return out + next_commit(t, now)
    # abort / compensate
    answered = p.step == bid
    if answered:
        p.step = None
    if receipt.outcome == "ok":
        p.undone.add(bid)
    elif receipt.outcome == "in-doubt":  # HATP-TXN-30: neither undone nor failed: the idempotent undo again
        return out + (undo_in_doubt(t, bid, now) if answered else next_abort(t, now))
    else:  # refused: definitely not undone
        p.undo_failed.append(bid)
    return out + next_abort(t, now)


def on_failed(t: Txn, ev: CallFailed, now: datetime) -> list[Command]:
    p1, h, p = t.phase1, t.holds, t.phase2
    bid = ev.branch_id
    pending = t.approvals.status.get(bid) == "pending"  # the gateway holds the ask: its pending vote is recorded
    if ev.phase == "approval" and ev.unanswered and pending and t.state in DECIDING:  # HATP-TXN-38: no answer is
        # not a no (nor a failed call: the record says `approval.unanswered`); polled again until the deadline
        again = now + timedelta(seconds=t.config.poll_seconds)
        body = {"requirementId": bid, "reason": ev.reason}
        return [Record(event="approval.unanswered", body=body), *arm(t, f"poll:{bid}", again)]
    out: list[Command] = [Record(event="call.failed", body={"branchId": bid, "phase": ev.phase, "reason": ev.reason})]
    if ev.phase == "tighten":  # not accepted: our own deadline still holds; HATP-MODE-8 checks the approval
        return out
    if ev.phase == "approval":  # an approver that fails never counts as a yes
        if t.state in (T.QUOTING, T.PREPARING, T.APPROVING):
            return out + abort(t, now, "APPROVER_FAILED", f"{bid}: {ev.reason}")
        return out
    if ev.phase in ("prepare", "quote"):
        p1.inflight.discard(bid)
        p1.votes[bid] = "unknown"
        if t.state is T.ABORTING:
            return out + queue_abort(t, bid, now)
        if t.state is T.COMMITTING:
            h.renewing.discard(bid)
        return out + abort(t, now, "PREPARE_FAILED", f"{bid}: {ev.reason}")
    if ev.phase == "renew":
        h.renewing.discard(bid)
        h.no_renew.add(bid)
        return out + (next_commit(t, now) if t.state is T.COMMITTING else [])
    if ev.phase == "commit":
        if p.step == bid:
            p.step = None
        p.holds_out.discard(bid)
        return out + in_doubt(t, bid, now)
    if p.step == bid:  # abort / compensate: no answer, so in doubt as well (HATP-TXN-30), within the same bound
        p.step = None
        return out + undo_in_doubt(t, bid, now)
    return out + arm(t, "undo", now + timedelta(seconds=t.config.retry_seconds))


def start_recovered(t: Txn, now: datetime) -> list[Command]:
    """Phase 2 with the logged decision (HATP-TXN-11); without one, the approving phase again when the record
    waits only for a human and its holds still stand (HATP-TXN-22/23), else presumed abort."""
    decision = t.recovering
    presumed = ("PRESUMED_ABORT", "no decision was logged before the coordinator stopped")
    body: dict[str, str] = {"decision": decision or "none"}
    if decision == "presumed-abort" and t.abort_request is None:
        if isinstance(t.resume, Approving):
            lapsed = lapsed_hold(t, now)
            if lapsed is None:
                return resume_approving(t, t.resume, now)
            presumed = lapsed
            body["notResumed"] = f"{lapsed[0]}: {lapsed[1]}"
        elif isinstance(t.resume, str):
            body["notResumed"] = t.resume
    out: list[Command] = [Record(event="coordinator.recovered", body=body)]
    if decision == "commit":
        t.fire(Step.RESUMED_COMMIT)
        return out + next_commit(t, now)
    for b in t.branches:
        t.phase1.votes.setdefault(b, "unknown")
    for r in t.plan.approvals:  # the human may still be asked: withdraw it (the old coordinator may have asked)
        if t.approvals.status.get(r.id) not in ("yes", "no"):
            t.approvals.status[r.id] = "asked"
    if decision == "abort":
        return out + abort(t, now, "RECOVERED", "finishing the logged abort", log=False)
    if t.abort_request is not None:  # HATP-TXN-18: the agent's request is part of the record
        reason = t.abort_request.get("reason")
        out.append(Record(event="abort.requested", body={"reason": reason, "by": t.abort_request.get("by")}))
        return out + abort(t, now, "ABORT_REQUESTED", f"the agent asked: {reason or 'no reason given'}")
    return out + abort(t, now, *presumed)

"""Phase 2 of the coordinator state machine: commit in order, in doubt, abort in reverse order, recovery.

A mixin of hatp_mcp.core.coordinator.Coordinator (which owns the transition table and the entry point); split
out only to keep modules small. Pure: no IO, no clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.txn.events import (
    Arm,
    CallFailed,
    Command,
    Decide,
    Escalate,
    Finish,
    Outcome,
    ReceiptAnswer,
    Record,
    SendAbort,
    SendCommit,
    SendCompensate,
    SendPrepare,
    SendRenew,
    TxnState,
    Withdraw,
)
from hatp_mcp.core.txn.evidence import check_branch_receipt
from hatp_mcp.core.txn.timing import abort_order
from hatp_mcp.errors import HatpError

if TYPE_CHECKING:
    from hatp_mcp.core.txn.machine import Coordinator

__all__ = ["Phase2"]

T = TxnState
_OUTCOME_STATE = {Outcome.COMMITTED: T.COMMITTED, Outcome.ABORTED: T.ABORTED, Outcome.NEEDS_RECOVERY: T.NEEDS_RECOVERY}


class Phase2:
    """Phase-2 handlers. Only ever used as a base of Coordinator."""

    def _c(self) -> Coordinator:
        return self  # type: ignore[return-value]

    # -- helpers shared with phase 1 ----------------------------------------------------------------------
    def _arm(self, key: str, at: datetime) -> list[Command]:
        self._c()._d.timers[key] = at
        return [Arm(key=key, at=at)]

    def _renew(self, branch_id: str) -> SendRenew:
        c = self._c()
        b = c._branches[branch_id]
        c._d.renewing.add(branch_id)
        return SendRenew(branch_id=branch_id, lease_seconds=b.lease_seconds or c.config.renew_before_seconds * 4)

    @staticmethod
    def _refused(subject: str, exc: HatpError) -> Record:
        return Record(
            event="evidence.refused",
            body={"branchId": subject, "rule": exc.rule, "code": exc.code, "reason": exc.reason[:500]},
        )

    def _finish(self, outcome: Outcome) -> list[Command]:
        c = self._c()
        c.state = _OUTCOME_STATE[outcome]
        c._d.timers.clear()
        return [Finish(outcome=outcome)]

    def _final_done(self) -> bool:
        c = self._c()
        return any(c._branches[b].tier == "final" for b in c._d.committed)

    # -- commit -------------------------------------------------------------------------------------------
    def _decide_commit(self, now: datetime) -> list[Command]:
        c = self._c()
        c._d.decision = "commit"
        c._d.timers.clear()
        c.state = T.COMMITTING
        return [Decide(decision="commit", reason="every branch and every approver voted yes"), *self._next_commit(now)]

    def _next_commit(self, now: datetime) -> list[Command]:
        """Commit the next branch in order, after checking and renewing every short lease (HATP-TXN-9)."""
        c = self._c()
        d = c._d
        if d.step is not None or d.renewing or d.holds_out:
            return []
        if d.holds_refused:  # every hold commit sent together has answered; some were refused after the final
            refused, d.holds_refused = d.holds_refused, []
            return self._offer_recovery(refused, now) + self._finish(Outcome.NEEDS_RECOVERY)
        remaining = [b for b in c._order if b not in d.committed and b not in d.lapsed]
        if not remaining:
            return self._finish(Outcome.NEEDS_RECOVERY if d.lapsed else Outcome.COMMITTED)
        durations = [c._branches[b].max_duration_seconds for b in remaining]
        need = float(c.config.renew_before_seconds)
        if all(x is not None for x in durations):
            need = max(need, float(sum(x or 0 for x in durations)))
        out: list[Command] = []
        for h in remaining:
            if c._branches[h].tier != "hold" or h in d.no_renew:
                continue
            expires = d.leases.get(h)
            if expires is not None and now >= expires:
                if self._final_done():
                    d.lapsed.add(h)
                    out.append(Record(event="hold.lapsed", body={"branchId": h}))
                    continue
                d.lost.add(h)
                d.renewing.add(h)
                out += [Record(event="hold.lost", body={"branchId": h}), SendPrepare(branch_id=h)]
            elif expires is None or (expires <= now + timedelta(seconds=need) and expires < d.horizons.get(h, expires)):
                out.append(self._renew(h))
        if d.renewing:
            return out
        if not [b for b in remaining if b not in d.lapsed]:
            return out + self._next_commit(now)
        live = [b for b in remaining if b not in d.lapsed]
        if self._final_done() and all(c._branches[b].tier == "hold" for b in live):
            # After the final branch only holds are left; nothing depends on their order, so they commit together.
            d.holds_out = set(live)
            return [*out, *(SendCommit(branch_id=b, preconditions=d.preconditions.get(b, {})) for b in live)]
        step = live[0]
        d.step = step
        return [*out, SendCommit(branch_id=step, preconditions=d.preconditions.get(step, {}))]

    def _on_receipt(self, ev: ReceiptAnswer, now: datetime) -> list[Command]:
        c = self._c()
        d = c._d
        b = c._branches.get(ev.branch_id)
        if b is None:
            raise HatpError("HATP-TXN-2", f"no branch {ev.branch_id!r} in this plan", code="BAD_EVIDENCE")
        phase = str(ev.receipt.get("phase", "commit"))
        try:
            receipt = check_branch_receipt(
                c.plan, c.plan_digest, b, ev.receipt, c.keyring, {"renew", "commit", "abort", "compensate"}
            )
        except HatpError as exc:
            failed = CallFailed(branch_id=b.branch_id, phase=phase, reason=exc.reason)
            return [self._refused(b.branch_id, exc), *self._on_failed(failed, now)]
        out: list[Command] = [
            Record(event=receipt.phase, body={"branchId": b.branch_id}, evidence=ev.receipt, author=b.participant)
        ]
        bid = b.branch_id
        if receipt.phase == "renew":
            d.renewing.discard(bid)
            if c.state is T.ABORTING:  # being released anyway: never placed again
                return out
            if receipt.outcome == "ok":
                out += c._note_lease(bid, receipt, now)
            elif c.state in (T.IN_DOUBT,) or self._final_done():
                d.lapsed.add(bid)
                out.append(Record(event="hold.lapsed", body={"branchId": bid}))
            else:  # lost: place it again, without asking the human again (HATP-TXN-8)
                d.lost.add(bid)
                d.leases.pop(bid, None)
                d.inflight.add(bid)
                if c.state is T.COMMITTING:
                    d.renewing.add(bid)
                out += [Record(event="hold.lost", body={"branchId": bid}), SendPrepare(branch_id=bid)]
            if c.state is T.COMMITTING:
                out += self._next_commit(now)
            return out
        if receipt.phase == "commit":
            if d.step == bid:
                d.step = None
            d.holds_out.discard(bid)
            if receipt.outcome == "in-doubt":
                return out + self._in_doubt(bid, now)
            resolving = c.state is T.IN_DOUBT and d.doubt == bid
            if receipt.outcome == "ok":
                d.committed[bid] = receipt.undo_token
                if resolving:
                    out += self._resolved(bid, "yes", now)
                    c.state = T.COMMITTING
                if c.state is T.IN_DOUBT:  # another hold of the same step is in doubt: its answer decides what next
                    return out
                return out + self._next_commit(now)
            if resolving:
                out += self._resolved(bid, "no", now)
            if not self._final_done():  # undo what ran, release the holds; never retry with new values (HATP-TXN-6)
                return out + self._abort(now, receipt.code or "COMMIT_REFUSED", f"{bid} refused its commit")
            # After the irreversible step nothing is undone: recovery is offered for the refused holds once every
            # hold commit that is out has answered (_next_commit), and the outcome is NEEDS_RECOVERY.
            d.holds_refused.append(bid)
            if c.state is T.IN_DOUBT and not resolving:
                return out
            c.state = T.COMMITTING
            return out + self._next_commit(now)
        # abort / compensate
        if d.step == bid:
            d.step = None
        if receipt.outcome == "ok":
            d.undone.add(bid)
        else:
            d.undo_failed.append(bid)
        return out + self._next_abort(now)

    def _on_failed(self, ev: CallFailed, now: datetime) -> list[Command]:
        c = self._c()
        d = c._d
        bid = ev.branch_id
        out: list[Command] = [
            Record(event="call.failed", body={"branchId": bid, "phase": ev.phase, "reason": ev.reason})
        ]
        if ev.phase == "tighten":  # not accepted: our own deadline still holds; HATP-MODE-8 checks the approval
            return out
        if ev.phase == "approval":  # an approver that fails never counts as a yes
            if c.state in (T.QUOTING, T.PREPARING, T.APPROVING):
                return out + self._abort(now, "APPROVER_FAILED", f"{bid}: {ev.reason}")
            return out
        if ev.phase in ("prepare", "quote"):
            d.inflight.discard(bid)
            d.votes[bid] = "unknown"
            if c.state is T.ABORTING:
                return out + self._queue_abort(bid, now)
            if c.state is T.COMMITTING:
                d.renewing.discard(bid)
            return out + self._abort(now, "PREPARE_FAILED", f"{bid}: {ev.reason}")
        if ev.phase == "renew":
            d.renewing.discard(bid)
            d.no_renew.add(bid)
            return out + (self._next_commit(now) if c.state is T.COMMITTING else [])
        if ev.phase == "commit":
            if d.step == bid:
                d.step = None
            d.holds_out.discard(bid)
            return out + self._in_doubt(bid, now)
        if d.step == bid:  # abort / compensate: try again later
            d.step = None
            d.abort_queue.insert(0, ("compensate" if bid in d.committed else "abort", bid))
        return out + self._arm("undo", now + timedelta(seconds=c.config.retry_seconds))

    # -- in doubt -----------------------------------------------------------------------------------------
    def _in_doubt(self, bid: str, now: datetime) -> list[Command]:
        """Neither failed nor succeeded: keep holds alive, retry the idempotent commit, escalate (HATP-TXN-10)."""
        c = self._c()
        d = c._d
        out: list[Command] = []
        if c.state is not T.IN_DOUBT:
            out.append(Record(event="commit.in-doubt", body={"branchId": bid}))
        c.state = T.IN_DOUBT
        d.doubt = bid
        out += self._arm(f"retry:{bid}", now + timedelta(seconds=c.config.retry_seconds))
        for h, expires in d.leases.items():
            if h not in d.committed and expires < d.horizons.get(h, expires) and f"renew:{h}" not in d.timers:
                margin = min(timedelta(seconds=c.config.renew_before_seconds), max(expires - now, timedelta(0)) / 2)
                out += self._arm(f"renew:{h}", max(now, expires - margin))
        if not d.escalated and "escalate" not in d.timers:
            lead = timedelta(seconds=c.plan.escalation.lead_seconds if c.plan.escalation else 0)
            live = [d.horizons[h] for h in d.horizons if h not in d.committed]
            at = min(live) - lead if live else now
            if at <= now:
                out += self._escalate(now)
            else:
                out += self._arm("escalate", at)
        return out

    def _escalate(self, now: datetime) -> list[Command]:
        c = self._c()
        c._d.escalated = True
        to = c.plan.escalation.to if c.plan.escalation else c.plan.requester.principal
        live = [c._d.horizons[h] for h in c._d.horizons if h not in c._d.committed]
        body: dict[str, Any] = {"to": to, "branchId": c._d.doubt}
        if live:
            body["firstHoldHorizon"] = format_ts(min(live))
        reason = f"commit of {c._d.doubt} is in doubt; the holds end at {body.get('firstHoldHorizon', 'once')}"
        return [Record(event="escalated", body=body), Escalate(to=to, reason=reason)]

    def _resolved(self, bid: str, answer: str, now: datetime) -> list[Command]:
        c = self._c()
        d = c._d
        d.doubt = None
        holds = [h for h in c._order if c._branches[h].tier == "hold" and h not in d.committed]
        live = [h for h in holds if h not in d.lapsed and d.leases.get(h, now) > now]
        lapsed = [h for h in holds if h not in live]
        out: list[Command] = [
            Record(
                event="in-doubt.resolved",
                body={"branchId": bid, "answer": answer, "holdsLive": live, "holdsLapsed": lapsed},
            )
        ]
        if answer == "yes" and lapsed:
            d.lapsed.update(lapsed)
            out += self._offer_recovery(lapsed, now)
        return out

    def _offer_recovery(self, branches: list[str], now: datetime) -> list[Command]:
        """Offered, never performed: a linked transaction, or the participant's own void."""
        c = self._c()
        reauth = c.plan.recovery.off_session_reauth.wire() if c.plan.recovery is not None else {"consented": False}
        body = {
            "branches": branches,
            "options": ["linked-transaction", "participant-void"],
            "offSessionReauth": reauth,
            "performed": False,
        }
        return [Record(event="recovery.offered", body=body)]

    # -- abort --------------------------------------------------------------------------------------------
    def _abort(self, now: datetime, code: str, reason: str, *, log: bool = True) -> list[Command]:
        """Decide abort (durably), withdraw the asks, then release and undo in reverse commit order."""
        c = self._c()
        d = c._d
        if c.state is T.ABORTING:
            return []
        c.state = T.ABORTING
        d.decision = "abort"
        d.timers.clear()
        d.doubt = None
        out: list[Command] = [Decide(decision="abort", reason=f"{code}: {reason}")] if log else []
        for r in c.plan.approvals:
            if d.approvals.get(r.id) in ("asked", "pending"):  # HATP-TXN-17: recorded, then withdrawn
                out.append(Record(event="approval.withdrawn", body={"requirementId": r.id, "reason": code}))
                out.append(Withdraw(requirement_id=r.id))
        d.abort_queue = []
        for b in abort_order(c.plan):
            if b in d.undone:
                continue
            if b in d.committed:
                if c._branches[b].tier == "compensate":
                    d.abort_queue.append(("compensate", b))
            elif d.votes.get(b) != "no" or b in d.inflight or b in d.lost:
                d.abort_queue.append(("abort", b))
        return out + self._next_abort(now)

    def _queue_abort(self, bid: str, now: datetime) -> list[Command]:
        c = self._c()
        d = c._d
        if bid not in d.undone and d.step != bid and ("abort", bid) not in d.abort_queue:
            d.abort_queue.append(("abort", bid))
        return self._next_abort(now)

    def _next_abort(self, now: datetime) -> list[Command]:
        c = self._c()
        d = c._d
        if d.step is not None:
            return []
        while d.abort_queue:
            phase, bid = d.abort_queue.pop(0)
            if bid in d.undone:
                continue
            d.step = bid
            if phase == "compensate":
                return [SendCompensate(branch_id=bid, undo_token=d.committed.get(bid))]
            return [SendAbort(branch_id=bid, reason="the transaction aborted")]
        if "undo" in d.timers:
            return []
        return self._finish(Outcome.NEEDS_RECOVERY if d.undo_failed else Outcome.ABORTED)

    # -- recovery -----------------------------------------------------------------------------------------
    def _start_recovered(self, now: datetime) -> list[Command]:
        """Presumed abort without a logged decision; otherwise phase 2 with the logged one (HATP-TXN-11)."""
        c = self._c()
        d = c._d
        decision = c._recovering
        out: list[Command] = [Record(event="coordinator.recovered", body={"decision": decision or "none"})]
        if decision == "commit":
            c.state = T.COMMITTING
            return out + self._next_commit(now)
        for b in c._branches:
            d.votes.setdefault(b, "unknown")
        for r in c.plan.approvals:  # the human may still be asked: withdraw it (the old coordinator may have asked)
            if d.approvals.get(r.id) not in ("yes", "no"):
                d.approvals[r.id] = "asked"
        if decision == "abort":
            return out + self._abort(now, "RECOVERED", "finishing the logged abort", log=False)
        if c._abort_request is not None:  # HATP-TXN-18: the agent's request is part of the record
            reason = c._abort_request.get("reason")
            out.append(Record(event="abort.requested", body={"reason": reason, "by": c._abort_request.get("by")}))
            return out + self._abort(now, "ABORT_REQUESTED", f"the agent asked: {reason or 'no reason given'}")
        return out + self._abort(now, "PRESUMED_ABORT", "no decision was logged before the coordinator stopped")

"""Deadlines, leases and timers of the coordinator state machine: the approval deadline, renewals, timer events.

A mixin of hatp_mcp.core.coordinator.Coordinator, split out to keep modules small. Pure: no IO, no clock (`now`
is passed in).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Receipt, Vote
from hatp_mcp.core.txn.events import (
    Command,
    Poll,
    PrepareAnswer,
    Record,
    SendCommit,
    SendPrepare,
    Timer,
    TxnState,
)
from hatp_mcp.core.txn.phase2 import Phase2

__all__ = ["Deadlines"]

T = TxnState
_DECIDING = frozenset({T.QUOTING, T.PREPARING, T.APPROVING})


class Deadlines(Phase2):
    """Timer and lease handling. Only ever used as a base of Coordinator."""

    def _set_deadline(self, now: datetime, candidate: datetime | None, why: str) -> list[Command]:
        """The approval deadline: the plan's and requirements' decideBy, the approver's, and what the holds allow."""
        c = self._c()
        if not c.plan.approvals:
            return []
        options = [
            parse_ts(t) for t in [c.plan.deadlines.decide_by, *(r.decide_by for r in c.plan.approvals)] if t is not None
        ]
        if candidate is not None:
            options.append(candidate)
        if c.plan.deadlines.commit_by is not None and c.timing.commit is not None:  # leave room to commit by then
            options.append(parse_ts(c.plan.deadlines.commit_by) - timedelta(seconds=c.timing.commit))
        if c._d.horizons and c.mode in ("parallel", "holds-first") and c.timing.commit is not None:
            options.append(min(c._d.horizons.values()) - timedelta(seconds=c.timing.commit))
        if c._d.deadline is not None:
            options.append(c._d.deadline)
        if not options:
            return []
        new = min(options)
        if new == c._d.deadline:
            return []
        c._d.deadline = new
        out: list[Command] = [Record(event="approval.deadline", body={"decideBy": format_ts(new), "why": why})]
        if c._d.asked and now >= new and any(v != "yes" for v in c._d.approvals.values()):
            return out + c._abort(now, "APPROVAL_TIMEOUT", "the approval deadline passed (HATP-TXN-7)")
        return out + c._arm("deadline", new) + c._tighten(now)  # a shorter deadline reaches the gateway (MODE-7)

    def _note_lease(self, branch_id: str, receipt: Receipt, now: datetime) -> list[Command]:
        c = self._c()
        if receipt.lease_expires_at is None:
            return []
        expires = parse_ts(receipt.lease_expires_at)
        horizon = parse_ts(receipt.hold_horizon) if receipt.hold_horizon else expires
        c._d.leases[branch_id] = expires
        shrank = branch_id in c._d.horizons and horizon < c._d.horizons[branch_id]
        c._d.horizons[branch_id] = horizon
        out: list[Command] = []
        if expires < horizon:
            margin = min(timedelta(seconds=c.config.renew_before_seconds), (expires - now) / 2)
            out += c._arm(f"renew:{branch_id}", expires - margin)
        if c.state in _DECIDING or shrank:
            out += c._set_deadline(now, None, f"hold {branch_id} horizon" + (" shrank" if shrank else ""))
        return out

    def _on_timer(self, ev: Timer, now: datetime) -> list[Command]:
        c = self._c()
        if c._d.timers.get(ev.key) != ev.at:
            return []  # re-armed or cancelled since: stale
        del c._d.timers[ev.key]
        kind, _, arg = ev.key.partition(":")
        if kind == "renew" and c.state in _DECIDING | {T.IN_DOUBT} and arg not in c._d.committed:
            return [c._renew(arg)]
        if kind == "poll" and c._d.approvals.get(arg) == "pending" and c.state in _DECIDING:
            return [Poll(requirement_id=arg)]
        if kind == "deadline" and c.state in _DECIDING:
            if any(c._d.approvals.get(r.id) != "yes" for r in c.plan.approvals):
                return [
                    Record(event="approval.timeout", body={"decideBy": format_ts(ev.at)}),
                    *c._abort(now, "APPROVAL_TIMEOUT", "no decision by the approval deadline"),
                ]
        if kind == "retry" and c.state is T.IN_DOUBT and arg == c._d.doubt:
            out: list[Command] = [Record(event="commit.retry", body={"branchId": arg})]
            out.append(SendCommit(branch_id=arg, preconditions=c._d.preconditions.get(arg, {})))
            return out
        if kind == "escalate" and c.state is T.IN_DOUBT and not c._d.escalated:
            return c._escalate(now)
        if kind == "reprepare" and c.state in _DECIDING and c._d.votes.get(arg) == "pending":
            c._d.inflight.add(arg)
            quote = c._d.pending_phase.get(arg) == "quote"
            if quote:
                c._d.quoting.add(arg)
            return [SendPrepare(branch_id=arg, quote_only=quote)]
        if kind == "undo" and c.state is T.ABORTING:
            return c._next_abort(now)
        return []

    def _participant_pending(self, bid: str, asked: str, vote: Vote, ev: PrepareAnswer, now: datetime) -> list[Command]:
        """A participant that cannot answer yet: ask again (idempotent) until its signed decideBy (HATP-TXN-16)."""
        c = self._c()
        d = c._d
        author = c._branches[bid].participant
        if vote.decide_by is None:
            return [
                Record(event="vote.refused", body={"branchId": bid, "rule": "HATP-TXN-16", "code": "NO_DEADLINE"}),
                *c._abort(now, "NO_DEADLINE", f"{bid} voted pending without a decideBy"),
            ]
        out: list[Command] = []
        if d.votes.get(bid) != "pending":
            out += [
                Record(event="vote", body={"branchId": bid}, evidence=ev.vote, author=author),
                Record(event="receipt", body={"branchId": bid}, evidence=ev.receipt, author=author),
            ]
        d.votes[bid] = "pending"
        d.pending_phase[bid] = asked
        decide_by = parse_ts(vote.decide_by)
        if now >= decide_by:
            timeout = Record(event="vote.timeout", body={"branchId": bid, "decideBy": vote.decide_by})
            return [*out, timeout, *c._abort(now, "VOTE_TIMEOUT", f"{bid} did not decide by {vote.decide_by}")]
        # asked again at the latest at its deadline; still pending then (above) aborts
        return out + c._arm(f"reprepare:{bid}", min(now + timedelta(seconds=c.config.poll_seconds), decide_by))

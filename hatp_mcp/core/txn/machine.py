"""The coordinator's transaction state machine, pure: `Coordinator.handle(event, now) -> [commands]`.

This module is the whole machine at a glance: the states and steps (`TxnState`, `Step`, named in
hatp_mcp.core.txn.events with the rest of the vocabulary), `ACCEPTS` (per state, the events it accepts),
`TRANSITIONS` (the exact table `(state, step) -> state`; every state change is one of its rows, and the tables of
spec/coordinator.md section 5 are generated from both), `transition`, which reads it, and `handle`, which checks
that the state accepts the event and sends it to the phase that does the work. The work lives in plain functions
that take the machine's data (hatp_mcp.core.txn.data.Txn) explicitly: phase1 (start, votes, approvers), phase2
(receipts, failed calls, recovery), timers, and below them commit, abort, deadlines and terms. They compute what
to send and name each step that moves the transaction (`Txn.fire(step)`); `transition`, handed to the Txn here,
decides where the step leads, so the phases never set a state themselves and never import this module.

An event the state does not accept, or a step the table does not have from the current state, raises HatpError
HATP-TXN-13 and leaves the machine unchanged; so does any error while handling (the data's snapshot is restored).
The driver (hatp_mcp/runtime/coordinator/driver.py) persists `Record` / `Decide` commands before it sends anything
of the same batch. No IO, no clock: `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.record import DECIDED_EVENT
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.data import Config, Txn
from hatp_mcp.core.txn.events import (
    ApproverReply,
    CallFailed,
    Command,
    Event,
    PrepareAnswer,
    ReceiptAnswer,
    Start,
    Step,
    TxnState,
)
from hatp_mcp.core.txn.phase1 import on_approver, on_prepared, start
from hatp_mcp.core.txn.phase2 import on_failed, on_receipt
from hatp_mcp.core.txn.resume import approving_point
from hatp_mcp.core.txn.timers import on_timer
from hatp_mcp.core.txn.timing import Timing, choose_mode, timing
from hatp_mcp.errors import HatpError

__all__ = [
    "ACCEPTS",
    "TRANSITIONS",
    "Config",
    "Coordinator",
    "Step",
    "TxnState",
    "Validator",
    "transition",
    "transition_table",
]

Validator = Callable[[Plan, datetime], Sequence[Any]]
T, S = TxnState, Step
_ENDS = frozenset({T.COMMITTED, T.ABORTED, T.NEEDS_RECOVERY})
_EVENTS = ("prepared", "receipt", "failed", "approver", "timer")
# The events each state accepts (an answer that comes late is accepted and does nothing); the ends accept none.
ACCEPTS: dict[TxnState, tuple[str, ...]] = {
    T.NEW: ("start",),
    **dict.fromkeys((T.QUOTING, T.PREPARING, T.APPROVING, T.COMMITTING), _EVENTS),
    T.IN_DOUBT: ("receipt", "failed", "timer"),
    T.ABORTING: _EVENTS,
}
# Every state change: (state, what the phase did) -> the next state.
TRANSITIONS: dict[tuple[TxnState, Step], TxnState] = {
    (T.NEW, S.STARTED_QUOTING): T.QUOTING,
    (T.NEW, S.STARTED_PREPARING): T.PREPARING,
    (T.NEW, S.RESUMED_COMMIT): T.COMMITTING,  # a replacement with a logged commit (HATP-TXN-12)
    (T.NEW, S.RESUMED_APPROVING): T.APPROVING,  # a replacement whose record waits only for a human (HATP-TXN-22)
    (T.NEW, S.DECIDED_ABORT): T.ABORTING,  # a replacement: the logged abort, or presumed abort (HATP-TXN-12)
    (T.QUOTING, S.ASKED_APPROVERS): T.APPROVING,
    (T.QUOTING, S.DECIDED_ABORT): T.ABORTING,
    (T.PREPARING, S.ASKED_APPROVERS): T.APPROVING,  # holds-first: the humans approve the placed holds
    (T.PREPARING, S.BRANCHES_VOTED_YES): T.APPROVING,  # parallel: the humans were asked at start
    (T.PREPARING, S.DECIDED_COMMIT): T.COMMITTING,
    (T.PREPARING, S.DECIDED_ABORT): T.ABORTING,
    (T.APPROVING, S.APPROVED_QUOTES): T.PREPARING,
    (T.APPROVING, S.DECIDED_COMMIT): T.COMMITTING,
    (T.APPROVING, S.DECIDED_ABORT): T.ABORTING,
    (T.COMMITTING, S.COMMIT_IN_DOUBT): T.IN_DOUBT,
    (T.COMMITTING, S.DECIDED_ABORT): T.ABORTING,  # refused before the irreversible step (HATP-TXN-6)
    (T.COMMITTING, S.FINISHED_COMMITTED): T.COMMITTED,
    (T.COMMITTING, S.FINISHED_NEEDS_RECOVERY): T.NEEDS_RECOVERY,
    (T.IN_DOUBT, S.COMMIT_IN_DOUBT): T.IN_DOUBT,  # another commit in doubt, or the retry again
    (T.IN_DOUBT, S.DOUBT_RESOLVED): T.COMMITTING,
    (T.IN_DOUBT, S.DECIDED_ABORT): T.ABORTING,  # a late no before the irreversible step (HATP-TXN-11)
    (T.ABORTING, S.FINISHED_ABORTED): T.ABORTED,
    (T.ABORTING, S.FINISHED_NEEDS_RECOVERY): T.NEEDS_RECOVERY,  # an undo refused, or in doubt at its bound
}


def transition(state: TxnState, step: Step) -> TxnState:
    """Where `step` leads from `state`: the one function that decides a state change. Raises HatpError
    HATP-TXN-13 (ILLEGAL_TRANSITION) when the table has no such pair."""
    nxt = TRANSITIONS.get((state, step))
    if nxt is None:
        raise HatpError(
            "HATP-TXN-13",
            f"{step.value!r} may not happen in state {state.value!r}",
            code="ILLEGAL_TRANSITION",
        )
    return nxt


def transition_table() -> str:
    """The two Markdown tables of spec/coordinator.md section 5, generated from ACCEPTS and TRANSITIONS (a test
    compares them)."""
    rows = ["| state | accepts |", "|---|---|"]
    rows += [f"| {s.value} | {', '.join(ACCEPTS.get(s, ())) or 'nothing'} |" for s in TxnState]
    rows += ["", "| state | step | leads to |", "|---|---|---|"]
    for state in TxnState:
        rows += [
            f"| {state.value} | {step.value} | {TRANSITIONS[(state, step)].value} |"
            for step in Step
            if (state, step) in TRANSITIONS
        ]
    return "\n".join(rows)


class Coordinator:
    """One transaction. Build with `begin` (a new plan) or `recover` (from its logged record and decision)."""

    def __init__(self, plan: Plan, mode: str, timing: Timing, keyring: Keyring, config: Config) -> None:
        self._d = Txn(plan, mode, timing, keyring, config, transition)

    @property
    def plan(self) -> Plan:
        return self._d.plan

    @property
    def plan_digest(self) -> str:
        return self._d.plan_digest

    @property
    def mode(self) -> str:
        return self._d.mode

    @property
    def timing(self) -> Timing:
        return self._d.timing

    @property
    def keyring(self) -> Keyring:
        return self._d.keyring

    @property
    def config(self) -> Config:
        return self._d.config

    @property
    def state(self) -> TxnState:
        return self._d.state

    @property
    def validated(self) -> bool:
        """Whether the plan went through the validator at begin (recorded in txn.begin)."""
        return self._d.validated

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def begin(
        cls,
        plan: Plan,
        now: datetime,
        keyring: Keyring,
        validator: Validator | None = None,
        config: Config | None = None,
        estimates: Mapping[str, int | None] | None = None,
    ) -> Coordinator:
        """`estimates`: the gateway's signed worstSeconds per requirement (HATP-MODE-5; see choose_mode).

        Raises HatpError HATP-TXN-1 (the plan is invalid) or HATP-MODE-1 / 2 / 6 (no mode fits)."""
        violations = list(validator(plan, now)) if validator is not None else []
        if violations:
            first = violations[0]
            raise HatpError(
                "HATP-TXN-1",
                f"the plan is invalid: {len(violations)} violation(s), first {getattr(first, 'rule', '?')}: "
                f"{getattr(first, 'message', None) or getattr(first, 'reason', first)}",
                path=str(getattr(first, "path", "$")),
                code="PLAN_INVALID",
                fix="fix the violations (hatp validate) and begin again",
                data={"violations": [_violation(v) for v in violations]},
            )
        mode, t = choose_mode(plan, now, estimates)
        c = cls(plan, mode, t, keyring, config or Config())
        c._d.validated = validator is not None
        return c

    def choose_with(self, estimates: Mapping[str, int | None], now: datetime) -> None:
        """Before Start: choose the mode again with the gateway's estimates (HATP-MODE-5/6; see choose_mode).
        Raises HatpError HATP-MODE-1 / 2 / 6 and leaves the machine as it was."""
        if self.state is not TxnState.NEW:
            raise HatpError("HATP-TXN-13", "the mode is chosen before the transaction starts", code="ILLEGAL_EVENT")
        self._d.mode, self._d.timing = choose_mode(self.plan, now, estimates)

    def use_mode(self, mode: str, timing: Timing) -> None:
        """Before Start: run in `mode`, chosen again by the clock with the participants' durations (HATP-MODE-9)."""
        if self.state is not TxnState.NEW:
            raise HatpError("HATP-TXN-13", "the mode is chosen before the transaction starts", code="ILLEGAL_EVENT")
        if mode not in timing.fits:
            raise ValueError(f"mode {mode} is not among those that fit: {timing.fits}")
        self._d.mode, self._d.timing = mode, timing

    @classmethod
    def recover(
        cls,
        plan: Plan,
        events: Sequence[Mapping[str, Any]],
        decision: str | None,
        keyring: Keyring,
        config: Config | None = None,
        abort_request: Mapping[str, Any] | None = None,
    ) -> Coordinator:
        """A replacement coordinator: rebuild what the record says happened; `start` then finishes the job.

        `abort_request` (`{"reason", "by"}`) is the agent's request to abort that stopped the old run: without a
        logged decision the replacement records it (`abort.requested`, HATP-TXN-18) and aborts for it."""
        begin = events[0].get("body", {}) if events else {}
        mode = str(begin.get("mode", plan.mode if plan.mode != "auto" else "parallel"))
        c = cls(plan, mode, timing(plan, parse_ts(plan.created_at)), keyring, config or Config())
        for ev in events:
            c._replay(ev)
        c._d.recovering = decision or "presumed-abort"
        c._d.abort_request = dict(abort_request) if abort_request is not None and decision is None else None
        c._d.phase2.decision = decision
        if decision is None and abort_request is None:  # HATP-TXN-22: waiting only for a human is taken up again
            c._d.resume = approving_point(plan, events)
        return c

    def _replay(self, ev: Mapping[str, Any]) -> None:
        d = self._d
        evidence = ev.get("evidence") or {}
        body = ev.get("body") or {}
        b = body.get("branchId")
        if ev.get("event") == DECIDED_EVENT:  # HATP-TXN-26: told once; a replacement does not say it again
            d.phase2.answered = True
        if ev.get("event") == "approval.terms" and isinstance(body.get("terms"), dict):
            d.approvals.terms[str(body.get("requirementId"))] = ApprovalTerms.model_validate(body["terms"])
        if evidence.get("type") == "hatp.vote" and b in d.branches:
            d.phase1.votes[b] = evidence.get("decision", "no")
        if evidence.get("type") == "hatp.vote" and b in {r.id for r in self.plan.approvals}:
            d.approvals.status[b] = evidence.get("decision", "no")
        if evidence.get("type") == "hatp.receipt" and b in d.branches and evidence.get("outcome") == "ok":
            phase = evidence.get("phase")
            if phase == "prepare":
                d.phase1.preconditions[b] = evidence.get("preconditions") or {}
            if phase in ("prepare", "renew") and evidence.get("leaseExpiresAt"):
                d.holds.leases[b] = parse_ts(evidence["leaseExpiresAt"])
                d.holds.horizons[b] = parse_ts(evidence.get("holdHorizon") or evidence["leaseExpiresAt"])
            if phase == "commit":
                d.phase2.committed[b] = evidence.get("undoToken")
            if phase in ("abort", "compensate"):
                d.phase2.undone.add(b)
        if b in d.branches and _undo_in_doubt(ev):  # HATP-TXN-31: the bound counts the predecessor's sends too
            d.phase2.undo_doubts[b] = d.phase2.undo_doubts.get(b, 0) + 1
        if ev.get("event") == "undo.in-doubt" and b in d.branches and b not in d.phase2.undo_unresolved:
            d.phase2.undo_unresolved.append(b)

    # -- the one entry point ------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.state in _ENDS

    def handle(self, event: Event, now: datetime) -> list[Command]:
        """Feed one event. Raises HatpError HATP-TXN-13 for an event the state does not accept (ILLEGAL_EVENT) or
        a step the table does not have (ILLEGAL_TRANSITION); then, as after any error, the machine is unchanged."""
        if event.kind not in ACCEPTS.get(self.state, ()):
            raise HatpError(
                "HATP-TXN-13",
                f"event {event.kind!r} is not allowed in state {self.state.value!r}",
                code="ILLEGAL_EVENT",
            )
        saved = self._d.snapshot()
        try:
            return self._dispatch(event, now)
        except BaseException:
            self._d.restore(saved)
            raise

    def _dispatch(self, event: Event, now: datetime) -> list[Command]:
        d = self._d
        if isinstance(event, Start):
            return start(d, now)
        if isinstance(event, PrepareAnswer):
            return on_prepared(d, event, now)
        if isinstance(event, ReceiptAnswer):
            return on_receipt(d, event, now)
        if isinstance(event, CallFailed):
            return on_failed(d, event, now)
        if isinstance(event, ApproverReply):
            return on_approver(d, event, now)
        return on_timer(d, event, now)


def _undo_in_doubt(ev: Mapping[str, Any]) -> bool:
    """A recorded undo send that ended in doubt: an in-doubt abort or compensate receipt, or such a call failed."""
    evidence = ev.get("evidence") or {}
    if evidence.get("type") == "hatp.receipt":
        return evidence.get("phase") in ("abort", "compensate") and evidence.get("outcome") == "in-doubt"
    return ev.get("event") == "call.failed" and (ev.get("body") or {}).get("phase") in ("abort", "compensate")


def _violation(v: Any) -> dict[str, Any]:
    if hasattr(v, "to_dict"):
        out = v.to_dict()
        if isinstance(out, dict):
            return out
    return {"rule": str(getattr(v, "rule", "?")), "path": str(getattr(v, "path", "$")), "reason": str(v)}

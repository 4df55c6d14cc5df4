"""One saga's step machine, pure: `handle(event, now) -> [commands]`, and `replay(entries)` after a restart.

The machine's state is a fold over the entries it writes: `handle` decides which entries an event produces and
applies each through `_apply`, the same function `replay` uses, so a saga rebuilt from its journal is the saga
that wrote it. Two tables say what is legal: `SAGA_TRANSITIONS` (per saga status, the events it accepts and the
statuses they may lead to) and `STEP_TRANSITIONS` (per step state, the entries that may follow and where they
lead). An event or entry the tables do not allow raises HatpError HATP-JRN-1 and leaves the machine unchanged;
so does any error while handling. Rollback walks the steps last first (HATP-JRN-3..6). No IO, no clock.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.journal.events import (
    ArmRetry,
    CallStep,
    CallUndo,
    Command,
    Complete,
    DeadLetter,
    Event,
    Finished,
    Lookup,
    LookupAnswered,
    Recovered,
    RetryDue,
    Rollback,
    SagaStatus,
    StartStep,
    StepCompleted,
    StepFailed,
    StepState,
    UndoAnswered,
    Write,
)
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.signing.canonical import CanonicalError, canonical
from hatp_mcp.errors import HatpError

__all__ = [
    "SAGA_TRANSITIONS",
    "STEP_TRANSITIONS",
    "RetryPolicy",
    "SagaMachine",
    "StepView",
    "output_body",
    "read_output",
    "step_key",
    "transition_tables",
    "undo_key",
]

S = SagaStatus
P = StepState
_ROLLING = frozenset({S.FAILED, S.ROLLED_BACK, S.ROLLBACK_FAILED})
SAGA_TRANSITIONS: dict[SagaStatus, dict[str, frozenset[SagaStatus]]] = {
    S.IN_PROGRESS: {
        "start": frozenset({S.IN_PROGRESS}),
        "completed": frozenset({S.IN_PROGRESS}),
        "failed": frozenset({S.IN_PROGRESS}),
        "lookup": frozenset({S.IN_PROGRESS}),
        "recovered": frozenset({S.IN_PROGRESS}) | _ROLLING,
        "complete": frozenset({S.COMPLETED}),
        "rollback": _ROLLING,
    },
    S.FAILED: dict.fromkeys(("lookup", "undo", "retry", "recovered"), _ROLLING),
}
# Per step state: entry -> the state it leads to. A step enters PENDING with `step.started`.
STEP_TRANSITIONS: dict[StepState | None, dict[str, StepState]] = {
    None: {"step.started": P.PENDING},
    P.PENDING: {"step.completed": P.COMPLETED, "step.failed": P.FAILED, "step.in-doubt": P.IN_DOUBT},
    P.IN_DOUBT: {
        "lookup.happened": P.COMPLETED,
        "lookup.absent": P.FAILED,
        "step.dead-letter": P.IN_DOUBT,
        "rollback.stopped": P.IN_DOUBT,
    },
    P.COMPLETED: {"undo.started": P.UNDOING, "step.skipped": P.COMPLETED, "rollback.stopped": P.COMPLETED},
    P.UNDOING: {
        "undo.started": P.UNDOING,
        "undo.failed": P.UNDOING,
        "undo.done": P.ROLLED_BACK,
        "undo.gave-up": P.ROLLBACK_FAILED,
    },
}
# Saga-level entries: from which statuses each may come.
_SAGA_ENTRIES: dict[str, frozenset[SagaStatus | None]] = {
    "saga.begin": frozenset({None}),
    "saga.recovered": frozenset({S.IN_PROGRESS, S.FAILED}),
    "saga.rollback": frozenset({S.IN_PROGRESS}),
    "saga.closed": frozenset({S.IN_PROGRESS, S.FAILED}),
}
# Step entries legal while the saga runs forward, and while it rolls back.
_FORWARD = frozenset(
    {"step.started", "step.completed", "step.failed", "step.in-doubt", "lookup.happened", "lookup.absent"}
)
_BACKWARD = frozenset(STEP_TRANSITIONS[P.UNDOING]) | {
    "step.in-doubt",
    "lookup.happened",
    "lookup.absent",
    "step.dead-letter",
    "step.skipped",
    "rollback.stopped",
}


def transition_tables() -> str:
    """The two Markdown tables of spec/journal.md section 2, generated from the tables (a test compares them)."""
    rows = ["| saga status | accepts | may lead to |", "|---|---|---|"]
    for status in SagaStatus:
        accepts = SAGA_TRANSITIONS.get(status, {})
        targets = sorted({t for ts in accepts.values() for t in ts}, key=list(SagaStatus).index)
        rows.append(f"| {status.value} | {', '.join(accepts) or 'nothing'} | {', '.join(t.value for t in targets)} |")
    rows += ["", "| step state | entry | leads to |", "|---|---|---|"]
    for state in [None, *StepState]:
        name = "(new)" if state is None else state.value
        entries = STEP_TRANSITIONS.get(state, {})
        if not entries:
            rows.append(f"| {name} | nothing | |")
        for entry, target in entries.items():
            rows.append(f"| {name} | {entry} | {target.value} |")
    return "\n".join(rows)


def step_key(saga_id: str, step_id: str, attempt: int) -> str:
    """The idempotency key of a step's call (HATP-JRN-7): the tool may use it to make a repeated call one call."""
    return f"{saga_id}:{step_id}:{attempt}"


def undo_key(saga_id: str, step_id: str, attempt: int) -> str:
    """The idempotency key of a step's undo: the same on every retry of that undo (HATP-JRN-7)."""
    return f"{step_key(saga_id, step_id, attempt)}:undo"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded undo retries (HATP-JRN-8): attempt n+1 waits base * factor**(n-1), at most cap, after attempt n
    failed; after `max_attempts` failures the undo gives up. Milliseconds, so the record holds no floats."""

    max_attempts: int = 5
    base_ms: int = 1000
    factor: int = 2
    cap_ms: int = 60_000

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.base_ms < 0 or self.factor < 1 or self.cap_ms < self.base_ms:
            raise ValueError(f"retry policy {self} is not bounded: need max_attempts >= 1, factor >= 1, cap >= base")

    def delay(self, failed_attempt: int) -> timedelta:
        return timedelta(milliseconds=min(self.cap_ms, self.base_ms * self.factor ** (failed_attempt - 1)))

    def wire(self) -> dict[str, int]:
        return {"maxAttempts": self.max_attempts, "baseMs": self.base_ms, "factor": self.factor, "capMs": self.cap_ms}

    @classmethod
    def from_wire(cls, value: Mapping[str, Any]) -> RetryPolicy:
        return cls(int(value["maxAttempts"]), int(value["baseMs"]), int(value["factor"]), int(value["capMs"]))


@dataclass(frozen=True, slots=True)
class StepView:
    """What a saga says about one step (`saga.steps`). `rollback`: what rollback did with it, when it did."""

    step_id: str
    tool: str
    state: StepState
    args: dict[str, Any]
    output: Any
    error: str | None
    pivot: bool
    has_undo: bool
    key: str
    undo_attempts: int
    retry_at: str | None  # when its failed undo is tried again
    rollback: str | None  # undone | skipped-no-undo | kept-irreversible | kept-pivot | dead-letter | undo-failed
    irreversible: bool = False
    rule: dict[str, Any] | None = None  # the rule it was journaled with, when its journaler gave one (HATP-PXY-44)


@dataclass
class _Step:
    step_id: str
    tool: str
    args: dict[str, Any]
    has_undo: bool
    pivot: bool
    attempt: int
    state: StepState = P.PENDING
    output: Any = None
    error: str | None = None
    undo_attempts: int = 0
    retry_at: str | None = None  # an undo retry is armed for this time
    settled: str | None = None  # skipped-no-undo | kept-irreversible | kept-pivot | dead-letter: rollback is done
    irreversible: bool = False  # it cannot be undone: rollback leaves it in place and says so (HATP-JRN-19)
    rule: dict[str, Any] | None = None  # how its journaler undoes it, from its step.started entry (HATP-PXY-44)
    undo_lost: bool = False  # its undo was out when the process stopped: it may be sent again, same key


@dataclass
class _Data:
    status: SagaStatus | None = None
    name: str = ""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    steps: dict[str, _Step] = field(default_factory=dict)  # in start order
    stopped_at: str | None = None  # the pivot rollback stopped at
    reason: str | None = None  # why it rolled back
    owner: str | None = None  # the caller that began it, when its journal knows callers (HATP-JRN-17)


class SagaMachine:
    """One saga. Build with `begin` (new) or `replay` (from its journal entries)."""

    def __init__(self, saga_id: str) -> None:
        self.saga_id = saga_id
        self._d = _Data()
        self._touched: dict[str, _Step | None] | None = None  # while handling: what to restore on an error

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def begin(
        cls, saga_id: str, name: str, retry: RetryPolicy | None = None, owner: str | None = None
    ) -> tuple[SagaMachine, list[Command]]:
        """A new saga and its first entry (to write before any step). `owner`: the authenticated caller that began
        it (HATP-JRN-17), written into `saga.begin`."""
        m = cls(saga_id)
        body: dict[str, Any] = {"sagaId": saga_id, "name": name, "retry": (retry or RetryPolicy()).wire()}
        if owner is not None:
            body["owner"] = owner
        m._apply("saga.begin", body)
        return m, [Write(event="saga.begin", body=body)]

    @classmethod
    def replay(cls, saga_id: str, entries: Iterable[tuple[str, Mapping[str, Any]]]) -> SagaMachine:
        """Rebuild a saga from its entries `(event, body)`. Raises HatpError HATP-JRN-1 (an entry its state does not
        allow: the journal was not written by this machine) or HATP-JRN-3/4/6/9 (a close its steps do not justify, an
        undo twice); its `data["index"]` is the entry's position."""
        m = cls(saga_id)
        for i, (event, body) in enumerate(entries):
            try:
                m._apply(event, body)
            except HatpError as exc:
                exc.data["index"] = i
                raise
        return m

    # -- what it says ---------------------------------------------------------------------------------------
    @property
    def status(self) -> SagaStatus:
        if self._d.status is None:
            raise HatpError("HATP-JRN-1", "the saga has not begun", code="NOT_BEGUN")
        return self._d.status

    @property
    def name(self) -> str:
        return self._d.name

    @property
    def owner(self) -> str | None:
        return self._d.owner

    @property
    def done(self) -> bool:
        return self._d.status in (S.COMPLETED, S.ROLLED_BACK, S.ROLLBACK_FAILED)

    @property
    def stopped_at(self) -> str | None:
        return self._d.stopped_at

    @property
    def steps(self) -> list[StepView]:
        return [_view(self.saga_id, s) for s in self._d.steps.values()]

    @property
    def step_count(self) -> int:
        return len(self._d.steps)

    def step(self, step_id: str) -> StepView:
        """Raises HatpError HATP-JRN-1 for a step this saga does not have."""
        return _view(self.saga_id, self._step(step_id))

    # -- the one entry point ------------------------------------------------------------------------------
    def handle(self, event: Event, now: datetime) -> list[Command]:
        """Feed one event. Raises HatpError HATP-JRN-1 for an event the saga's status does not accept, or that its
        step's state does not (the machine unchanged); HATP-CANON-2 for arguments that are not canonical JSON."""
        status = self.status
        allowed = SAGA_TRANSITIONS.get(status, {}).get(event.kind)
        if allowed is None:
            raise HatpError(
                "HATP-JRN-1",
                f"event {event.kind!r} is not allowed while the saga is {status.value}",
                code="ILLEGAL_EVENT",
                fix=f"while {status.value} the saga accepts: "
                + (", ".join(sorted(SAGA_TRANSITIONS.get(status, {}))) or "nothing (it is finished)"),
            )
        d = self._d
        scalars = (d.status, d.name, d.retry, d.stopped_at, d.reason)
        self._touched = {}  # step id -> its state before this event (None: added by it); O(steps touched)
        try:
            out = self._dispatch(event, now)
            if self.status not in allowed:  # pragma: no cover - the tables and the dispatch agree (tested)
                raise HatpError("HATP-JRN-1", f"{event.kind!r} may not lead to {self.status.value}", code="ILLEGAL")
        except BaseException:
            d.status, d.name, d.retry, d.stopped_at, d.reason = scalars
            for step_id, before in self._touched.items():
                if before is None:
                    d.steps.pop(step_id, None)
                else:
                    d.steps[step_id] = before
            raise
        finally:
            self._touched = None
        return out

    def _dispatch(self, event: Event, now: datetime) -> list[Command]:
        if isinstance(event, StartStep):
            return self._start(event)
        if isinstance(event, StepCompleted):
            return self._write("step.completed", {"stepId": event.step_id, **output_body(event.output)})
        if isinstance(event, StepFailed):
            return self._write("step.failed", {"stepId": event.step_id, "error": event.error})
        if isinstance(event, Complete):
            return [*self._write("saga.closed", {"status": S.COMPLETED.value}), Finished(status=S.COMPLETED)]
        if isinstance(event, Rollback):
            return self._write("saga.rollback", {"reason": event.reason}) + self._next(now)
        if isinstance(event, Recovered):
            return self._recovered(event, now)
        if isinstance(event, LookupAnswered):
            return self._on_lookup(event, now)
        if isinstance(event, UndoAnswered):
            return self._on_undo(event, now)
        return self._on_retry(event, now)

    # -- forward --------------------------------------------------------------------------------------------
    def _start(self, ev: StartStep) -> list[Command]:
        if ev.step_id in self._d.steps:
            raise HatpError(
                "HATP-JRN-1", f"step {ev.step_id!r} already exists in this saga", code="DUPLICATE_STEP", path="stepId"
            )
        if not isinstance(ev.args, dict):
            raise HatpError("HATP-JRN-11", "a step's arguments are a JSON object", path="args", code="BAD_ARGUMENTS")
        canonical(ev.args)  # HATP-CANON-2: arguments are JSON data the record can sign (money as decimal strings)
        if ev.rule is not None:
            canonical(ev.rule)  # (the same for the rule the step is journaled with)
        body = {
            "stepId": ev.step_id,
            "tool": ev.tool,
            "args": ev.args,
            "undo": ev.has_undo,
            "pivot": ev.pivot,
            "attempt": 1,
            "key": step_key(self.saga_id, ev.step_id, 1),
        }
        if ev.irreversible:
            if ev.has_undo or ev.pivot:
                raise HatpError(
                    "HATP-JRN-19", "an irreversible step has no undo and is no pivot", code="BAD_STEP", path="args"
                )
            body["irreversible"] = True
        if ev.rule is not None:
            body["rule"] = ev.rule
        out = self._write("step.started", body)
        return [*out, CallStep(step_id=ev.step_id, tool=ev.tool, args=ev.args, key=str(body["key"]))]

    def _recovered(self, ev: Recovered, now: datetime) -> list[Command]:
        if ev.policy not in ("rollback", "resume"):
            raise ValueError(f"recovery policy {ev.policy!r} is neither 'rollback' nor 'resume'")
        out = self._write("saga.recovered", {"policy": ev.policy})
        for s in list(self._d.steps.values()):
            if s.state is P.PENDING:  # its call went out; its result was never written (HATP-JRN-6)
                out += self._write("step.in-doubt", {"stepId": s.step_id})
        if self._d.status is S.FAILED:
            return out + self._next(now, resending=True)
        if ev.policy == "rollback":
            return out + self._write("saga.rollback", {"reason": "recovered after a crash"}) + self._next(now)
        return out + [
            Lookup(step_id=s.step_id, tool=s.tool, args=s.args, key=step_key(self.saga_id, s.step_id, s.attempt))
            for s in self._d.steps.values()
            if s.state is P.IN_DOUBT
        ]

    def _on_lookup(self, ev: LookupAnswered, now: datetime) -> list[Command]:
        s = self._step(ev.step_id)
        if s.state is not P.IN_DOUBT or s.settled is not None:
            raise HatpError(
                "HATP-JRN-1", f"step {s.step_id} is {s.state.value}, not in doubt: nothing to look up", code="ILLEGAL"
            )
        if ev.happened is True:
            out = self._write("lookup.happened", {"stepId": s.step_id, **output_body(ev.output)})
        elif ev.happened is False:
            out = self._write("lookup.absent", {"stepId": s.step_id})
        elif self._d.status is S.IN_PROGRESS:  # resume: it stays in doubt; a rollback will make it a dead letter
            return []
        else:
            error = ev.error or "the tool has no lookup: whether the call happened is unknown"
            out = self._write("step.dead-letter", {"stepId": s.step_id, "phase": "execute", "error": error})
            out.append(DeadLetter(entry=self._dead_letter(s, "execute", error)))
            if s.pivot:  # it may have happened: rollback cannot go past it (HATP-JRN-5)
                out += self._write("rollback.stopped", {"stepId": s.step_id, "reason": "pivot-in-doubt"})
                return out + self._close()
        return out + (self._next(now) if self._d.status is S.FAILED else [])

    # -- rollback ---------------------------------------------------------------------------------------------
    def _next(self, now: datetime, resending: bool = False) -> list[Command]:
        """The next thing rollback does, walking the steps last first (HATP-JRN-3)."""
        out: list[Command] = []
        for s in reversed(self._d.steps.values()):
            if s.state in (P.FAILED, P.ROLLED_BACK, P.ROLLBACK_FAILED) or s.settled is not None:
                continue
            if s.state is P.PENDING:  # rolled back with its call out: its outcome is unknown
                out += self._write("step.in-doubt", {"stepId": s.step_id})
            if s.state is P.IN_DOUBT:
                key = step_key(self.saga_id, s.step_id, s.attempt)
                return [*out, Lookup(step_id=s.step_id, tool=s.tool, args=s.args, key=key)]
            if s.state is P.COMPLETED and s.pivot:
                out += self._write("rollback.stopped", {"stepId": s.step_id, "reason": "pivot"})
                return out + self._close()
            if s.state is P.COMPLETED and not s.has_undo:
                reason = "irreversible" if s.irreversible else "no-undo"
                out += self._write("step.skipped", {"stepId": s.step_id, "reason": reason})
                continue
            if s.state is P.UNDOING and s.retry_at is not None:
                if not resending:  # pragma: no cover - the walk reaches an armed retry only after a restart
                    raise HatpError("HATP-JRN-1", f"step {s.step_id}: its undo retry is already armed", code="ILLEGAL")
                return [*out, ArmRetry(step_id=s.step_id, at=s.retry_at)]  # the same absolute deadline
            # COMPLETED with an undo, or UNDOING with its undo out when the process stopped: (re)send it, same key
            return out + self._send_undo(s)
        return out + self._close()

    def _send_undo(self, s: _Step) -> list[Command]:
        attempt = s.undo_attempts + 1
        key = undo_key(self.saga_id, s.step_id, s.attempt)
        out = self._write("undo.started", {"stepId": s.step_id, "attempt": attempt, "key": key})
        return [*out, CallUndo(step_id=s.step_id, tool=s.tool, args=s.args, output=s.output, key=key, attempt=attempt)]

    def _on_undo(self, ev: UndoAnswered, now: datetime) -> list[Command]:
        s = self._step(ev.step_id)
        if s.state is not P.UNDOING or s.retry_at is not None:
            raise HatpError(
                "HATP-JRN-9",
                f"step {s.step_id} is {s.state.value}: no undo of it is out, so this answer is not one",
                code="UNDO_NOT_OUT",
            )
        if ev.ok:
            return self._write("undo.done", {"stepId": s.step_id, **output_body(ev.output)}) + self._next(now)
        error = ev.error or "the undo failed"
        if ev.retryable and s.undo_attempts < self._d.retry.max_attempts:
            at = format_ts(now + self._d.retry.delay(s.undo_attempts))
            body = {"stepId": s.step_id, "attempt": s.undo_attempts, "error": error, "retryAt": at}
            return [*self._write("undo.failed", body), ArmRetry(step_id=s.step_id, at=at)]
        body = {"stepId": s.step_id, "attempts": s.undo_attempts, "error": error}
        out = self._write("undo.gave-up", body)
        out.append(DeadLetter(entry=self._dead_letter(s, "undo", error)))
        return out + self._next(now)

    def _on_retry(self, ev: RetryDue, now: datetime) -> list[Command]:
        s = self._step(ev.step_id)
        if s.state is not P.UNDOING or s.retry_at is None:
            raise HatpError("HATP-JRN-9", f"step {s.step_id}: no undo retry is armed", code="NO_RETRY_ARMED")
        if now < parse_ts(s.retry_at):
            raise HatpError("HATP-JRN-8", f"step {s.step_id}: the retry is due at {s.retry_at}", code="NOT_DUE")
        return self._send_undo(s)

    def _close(self) -> list[Command]:
        walked = self._walked()
        failed = any(_not_clean(s) for s in walked)
        status = S.ROLLBACK_FAILED if failed else S.ROLLED_BACK
        body: dict[str, Any] = {"status": status.value}
        if self._d.stopped_at is not None:
            body["stoppedAt"] = self._d.stopped_at
        left = [s.step_id for s in reversed(walked) if s.settled == "kept-irreversible"]
        if left:
            body["leftInPlace"] = left
        return [*self._write("saga.closed", body), Finished(status=status)]

    def _walked(self) -> list[_Step]:
        """The steps rollback is responsible for: last first, down to (not past) the pivot it stopped at."""
        out: list[_Step] = []
        for s in reversed(self._d.steps.values()):
            if s.step_id == self._d.stopped_at:
                if s.settled == "dead-letter":  # a pivot in doubt: it stopped the walk without being settled clean
                    out.append(s)
                break
            out.append(s)
        return out

    def _dead_letter(self, s: _Step, phase: str, error: str) -> dict[str, Any]:
        return {
            "sagaId": self.saga_id,
            "saga": self._d.name,
            "stepId": s.step_id,
            "tool": s.tool,
            "phase": phase,
            "input": s.args,
            "output": s.output,
            "error": error,
            "attempts": s.undo_attempts if phase == "undo" else 1,
            "key": step_key(self.saga_id, s.step_id, s.attempt),
        }

    # -- the fold -------------------------------------------------------------------------------------------
    def _write(self, event: str, body: dict[str, Any]) -> list[Command]:
        self._apply(event, body)
        return [Write(event=event, body=body)]

    def _step(self, step_id: object) -> _Step:
        s = self._d.steps.get(step_id) if isinstance(step_id, str) else None
        if s is None:
            raise HatpError("HATP-JRN-1", f"no step {step_id!r} in saga {self.saga_id}", code="NO_SUCH_STEP")
        return s

    def _touch(self, s: _Step) -> None:
        """Keep a copy of `s` as it was before this event first changes it (restored if the event fails)."""
        if self._touched is not None and s.step_id not in self._touched:
            self._touched[s.step_id] = copy.copy(s)  # shallow: args and outputs are replaced, never changed

    def _apply(self, event: str, body: Mapping[str, Any]) -> None:
        """Apply one entry. Raises HatpError (HATP-JRN-1: not legal here) before changing anything."""
        d = self._d
        if event in _SAGA_ENTRIES:
            if d.status not in _SAGA_ENTRIES[event]:
                where = "before the saga began" if d.status is None else f"while the saga is {d.status.value}"
                raise HatpError("HATP-JRN-1", f"entry {event!r} is not allowed {where}", code="ILLEGAL_ENTRY")
            if event == "saga.begin":
                d.status, d.name = S.IN_PROGRESS, str(body.get("name", ""))
                owner = body.get("owner")
                d.owner = owner if isinstance(owner, str) else None
                d.retry = RetryPolicy.from_wire(body.get("retry") or RetryPolicy().wire())
            elif event == "saga.rollback":
                d.status, d.reason = S.FAILED, str(body.get("reason", ""))
            elif event == "saga.closed":
                d.status = self._closing(body.get("status"))
            elif event == "saga.recovered":
                for s in d.steps.values():
                    if s.state is P.UNDOING and s.retry_at is None:
                        self._touch(s)
                        s.undo_lost = True
            return
        if d.status is None or self.done:
            raise HatpError("HATP-JRN-1", f"entry {event!r} after the saga ended", code="ILLEGAL_ENTRY")
        step_id = body.get("stepId")
        known = d.steps.get(step_id) if isinstance(step_id, str) else None
        if known is not None and known.state is P.IN_DOUBT and event in ("step.completed", "step.failed"):
            raise HatpError(
                "HATP-JRN-6",
                f"step {known.step_id} is in doubt: only its tool's lookup may say whether it happened, never a guess",
                code="IN_DOUBT_GUESSED",
                path=f"steps.{known.step_id}",
                fix="answer with the lookup's result (LookupAnswered), or leave it for a person (dead letter)",
            )
        phase = _FORWARD if d.status is S.IN_PROGRESS else _BACKWARD
        if event not in phase:
            raise HatpError(
                "HATP-JRN-1", f"entry {event!r} is not allowed while the saga is {d.status.value}", code="ILLEGAL_ENTRY"
            )
        step_id = body.get("stepId")
        if event == "step.started":
            if not isinstance(step_id, str) or step_id in d.steps:
                raise HatpError(
                    "HATP-JRN-1", f"step.started for an existing or unnamed step {step_id!r}", code="ILLEGAL"
                )
            if self._touched is not None:
                self._touched.setdefault(step_id, None)
            d.steps[step_id] = _Step(
                step_id,
                str(body.get("tool")),
                dict(body.get("args") or {}),
                bool(body.get("undo")),
                bool(body.get("pivot")),
                int(body.get("attempt", 1)),
                irreversible=bool(body.get("irreversible")),
                rule=rule if isinstance(rule := body.get("rule"), dict) else None,
            )
            return
        s = self._step(step_id)
        target = STEP_TRANSITIONS.get(s.state, {}).get(event)
        if target is None or (s.settled is not None and event != "rollback.stopped"):
            rule = "HATP-JRN-9" if event.startswith("undo.") else "HATP-JRN-1"
            raise HatpError(
                rule,
                f"entry {event!r} is not allowed for step {s.step_id} in state {s.state.value}"
                + (f" ({s.settled})" if s.settled else ""),
                code="ILLEGAL_ENTRY",
                path=f"steps.{s.step_id}",
            )
        if s.state is P.UNDOING and event == "undo.started" and s.retry_at is None and not s.undo_lost:
            raise HatpError(
                "HATP-JRN-9",
                f"step {s.step_id}: its undo is already out; a second undo would run it twice",
                code="UNDO_TWICE",
                path=f"steps.{s.step_id}",
            )
        if event in ("undo.done", "undo.failed", "undo.gave-up") and s.retry_at is not None:
            raise HatpError("HATP-JRN-9", f"step {s.step_id}: {event} while no undo is out", code="UNDO_NOT_OUT")
        self._touch(s)
        s.state = target
        if event in ("step.completed", "lookup.happened"):
            s.output = read_output(body)
        elif event == "step.failed":
            s.error = str(body.get("error"))
        elif event == "undo.started":
            s.undo_attempts, s.retry_at, s.undo_lost = s.undo_attempts + 1, None, False
        elif event == "undo.failed":
            s.error, s.retry_at = str(body.get("error")), str(body.get("retryAt"))
        elif event == "undo.gave-up":
            s.error = str(body.get("error"))
        elif event == "step.skipped":  # from the step as started, never from the entry's reason (HATP-JRN-19)
            s.settled = "kept-irreversible" if s.irreversible else "skipped-no-undo"
        elif event == "step.dead-letter":
            s.settled, s.error = "dead-letter", str(body.get("error"))
        elif event == "rollback.stopped":
            d.stopped_at = s.step_id
            if s.settled is None:
                s.settled = "kept-pivot"

    def _closing(self, claimed: object) -> SagaStatus:
        """The status a `saga.closed` may claim, given the steps. Raises HatpError naming what it would hide."""
        d = self._d
        try:
            status = SagaStatus(claimed)
        except ValueError:
            raise HatpError("HATP-JRN-1", f"saga.closed claims status {claimed!r}", code="ILLEGAL_ENTRY") from None
        if d.status is S.IN_PROGRESS:
            if status is not S.COMPLETED:
                raise HatpError(
                    "HATP-JRN-1", f"a saga in progress closes COMPLETED, not {status.value}", code="ILLEGAL"
                )
            open_ = [s.step_id for s in d.steps.values() if s.state not in (P.COMPLETED, P.FAILED)]
            if open_:
                raise HatpError(
                    "HATP-JRN-6",
                    f"the saga cannot complete with step(s) {open_} still pending or in doubt",
                    code="STEPS_OPEN",
                    fix="finish or fail each step, or roll the saga back",
                )
            return status
        if status not in (S.ROLLED_BACK, S.ROLLBACK_FAILED):
            raise HatpError("HATP-JRN-1", f"a rollback ends ROLLED_BACK or ROLLBACK_FAILED, not {status.value}")
        failed = False
        for s in self._walked():
            if s.state is P.COMPLETED and s.settled is None:
                raise HatpError(
                    "HATP-JRN-3",
                    f"the rollback ends while step {s.step_id} ({s.tool}) is completed and was not undone",
                    code="STEP_NOT_UNDONE",
                    path=f"steps.{s.step_id}",
                )
            if s.state in (P.PENDING, P.IN_DOUBT, P.UNDOING) and s.settled is None:
                raise HatpError(
                    "HATP-JRN-6",
                    f"the rollback ends while step {s.step_id} is {s.state.value}: its outcome was never settled",
                    code="STEP_UNSETTLED",
                    path=f"steps.{s.step_id}",
                )
            if status is S.ROLLED_BACK and s.settled == "kept-irreversible":
                raise HatpError(
                    "HATP-JRN-19",
                    f"the saga claims ROLLED_BACK, but step {s.step_id} ({s.tool}) is irreversible and stands",
                    code="IRREVERSIBLE_KEPT",
                    path=f"steps.{s.step_id}",
                )
            failed = failed or _not_clean(s)
        if failed and status is S.ROLLED_BACK:
            raise HatpError(
                "HATP-JRN-4",
                "the saga claims ROLLED_BACK, but a step's undo failed or a step stayed in doubt",
                code="ROLLBACK_NOT_CLEAN",
            )
        if not failed and status is S.ROLLBACK_FAILED:
            raise HatpError("HATP-JRN-4", "the saga claims ROLLBACK_FAILED, but every step was settled cleanly")
        return status


def _not_clean(s: _Step) -> bool:
    """Whether rollback left this step other than undone, skipped for having no undo, or failed (HATP-JRN-4/19)."""
    return s.state is P.ROLLBACK_FAILED or s.settled in ("dead-letter", "kept-irreversible")


def output_body(value: Any) -> dict[str, Any]:
    """How an output goes into an entry: as itself when it is canonical JSON (the record signs it), else as its
    JSON text (`outputText`: floats, say), else not at all, saying why (`outputError`). Nothing is dropped silently."""
    try:
        canonical(value)
        return {"output": value}
    except CanonicalError:
        pass
    try:
        return {"outputText": json.dumps(value, allow_nan=False)}
    except (TypeError, ValueError) as exc:
        return {"output": None, "outputError": f"the output is not JSON ({exc}); it was not recorded"}


def read_output(body: Mapping[str, Any]) -> Any:
    """The output an entry holds (see output_body)."""
    text = body.get("outputText")
    return json.loads(text) if isinstance(text, str) else body.get("output")


def _view(saga_id: str, s: _Step) -> StepView:
    rollback = s.settled
    if s.state is P.ROLLED_BACK:
        rollback = "undone"
    elif s.state is P.ROLLBACK_FAILED:
        rollback = "undo-failed"
    return StepView(
        step_id=s.step_id,
        tool=s.tool,
        state=s.state,
        args=s.args,
        output=s.output,
        error=s.error,
        pivot=s.pivot,
        has_undo=s.has_undo,
        key=step_key(saga_id, s.step_id, s.attempt),
        undo_attempts=s.undo_attempts,
        retry_at=s.retry_at,
        rollback=rollback,
        irreversible=s.irreversible,
        rule=s.rule,
    )

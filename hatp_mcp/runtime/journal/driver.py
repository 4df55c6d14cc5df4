"""The journal: durable sagas around the pure step machine (hatp_mcp/core/journal/machine.py).

    async with Journal(store, key, tools=[mark_returned, refund, label]) as journal:   # recovers on open
        async with journal.saga("return-882") as saga:
            await saga.run(mark_returned, {"item": "882"})
            await saga.run(refund, {"item": "882", "usd": "40.00"})
            await saga.run(label, {"item": "882"})      # raises: the saga rolls back, SagaRolledBack is raised

The driver feeds the machine, signs each entry into the saga's journal record, makes every entry of one event
durable in one store append before it performs what follows (the call, the undo, the lookup: HATP-JRN-2), bounds
every tool call on the Clock, sleeps to each retry's absolute time on the Clock, files dead letters with their
entry and calls the alert hook. It decides nothing the machine decides.
"""

from __future__ import annotations

import contextvars
import inspect
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio

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
    UndoAnswered,
    Write,
)
from hatp_mcp.core.journal.machine import RetryPolicy, SagaMachine, StepView
from hatp_mcp.core.journal.record import JournalChain, verify_journal
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.runtime.clock import Clock, SystemClock
from hatp_mcp.runtime.journal.undoable import DidNotHappen, Happened, OutcomeUnknown, Undoable, UndoRefused
from hatp_mcp.store.journal_store import JournalStore

__all__ = [
    "Alert",
    "Journal",
    "Saga",
    "SagaError",
    "SagaRollbackFailed",
    "SagaRolledBack",
    "StepInDoubt",
]

Alert = Callable[[dict[str, Any]], Awaitable[None] | None]
_current: contextvars.ContextVar[Saga | None] = contextvars.ContextVar("hatp_journal_saga", default=None)


class SagaError(Exception):
    """A saga that was rolled back. `cause`: the original failure; `steps`: what happened to each step."""

    def __init__(self, saga_id: str, status: SagaStatus, cause: BaseException | None, steps: list[StepView]) -> None:
        self.saga_id = saga_id
        self.status = status
        self.cause = cause
        self.steps = steps
        told = {s.step_id: s.rollback or s.state.value for s in steps}
        super().__init__(f"saga {saga_id} {status.value} after {cause!r}: {told}")


class SagaRolledBack(SagaError):
    """Every completed step was undone (or had no undo; or rollback stopped at a pivot: see `stopped_at`)."""

    def __init__(self, saga_id: str, cause: BaseException | None, steps: list[StepView], stopped_at: str | None):
        super().__init__(saga_id, SagaStatus.ROLLED_BACK, cause, steps)
        self.stopped_at = stopped_at


class SagaRollbackFailed(SagaError):
    """Some step could not be undone or stayed in doubt: `dead_letters` hold what a person must finish."""

    def __init__(
        self, saga_id: str, cause: BaseException | None, steps: list[StepView], dead_letters: list[dict[str, Any]]
    ):
        super().__init__(saga_id, SagaStatus.ROLLBACK_FAILED, cause, steps)
        self.dead_letters = dead_letters


class StepInDoubt(Exception):
    """A step's call did not answer in time, or its tool could not tell: whether it happened is unknown."""


@dataclass(frozen=True, slots=True)
class _Answer:
    ok: bool
    value: Any = None
    error: str | None = None
    unknown: bool = False
    final: bool = False  # retrying cannot help


class Saga:
    """One running saga. Made by `Journal.saga` (or `Journal.recover`); drives its machine."""

    def __init__(
        self, journal: Journal, machine: SagaMachine, chain: JournalChain, unwritten: Sequence[dict[str, Any]] = ()
    ) -> None:
        self._journal = journal
        self._m = machine
        self._chain = chain
        self._unwritten = list(unwritten)  # signed into the chain, written with the next append (Journal.one_call)
        self._lock = anyio.Lock()
        self._broken: BaseException | None = None  # an append failed: the saga lives on only in its store
        self.dead_letters: list[dict[str, Any]] = []

    @property
    def id(self) -> str:
        return self._m.saga_id

    @property
    def broken(self) -> bool:
        """An entry could not be made durable: this object is done; `Journal.get` rebuilds the saga from its store."""
        return self._broken is not None

    @property
    def name(self) -> str:
        return self._m.name

    @property
    def owner(self) -> str | None:
        """The caller that began it (HATP-JRN-17); None when its journal knew no callers (stdio, the Python API)."""
        return self._m.owner

    @property
    def status(self) -> SagaStatus:
        return self._m.status

    @property
    def steps(self) -> list[StepView]:
        return self._m.steps

    @property
    def stopped_at(self) -> str | None:
        return self._m.stopped_at

    def record(self) -> dict[str, Any]:
        return self._chain.record(self._m.name)

    # -- forward --------------------------------------------------------------------------------------------
    async def run(self, tool: Undoable | str, args: Mapping[str, Any] | None = None) -> Any:
        """Run one step: written (durable) before the call goes out, its result after (HATP-JRN-2).

        Returns the tool's output. Re-raises what `execute` raised (the step is FAILED); raises StepInDoubt when the
        call timed out or the tool raised OutcomeUnknown (the step stays pending: rollback looks it up). Raises
        HatpError for a step the saga refuses (HATP-JRN-1: it is not in progress; HATP-CANON-2: arguments)."""
        t = self._journal.tool(tool) if isinstance(tool, str) else self._journal.register(tool)
        async with self._lock:
            call = await self._start(t, dict(args or {}))
            answer = await self._journal._call(t.execute, call.args, call.key)
            if answer.unknown:
                raise StepInDoubt(f"step {call.step_id} ({t.name}): {answer.error}")
            if not answer.ok:
                await self._feed(StepFailed(step_id=call.step_id, error=str(answer.error)))
                if not isinstance(answer.value, BaseException):
                    raise BrokenInvariant(f"step {call.step_id} failed and carries no exception")
                raise answer.value
            await self._feed(StepCompleted(step_id=call.step_id, output=answer.value))
            return self._m.step(call.step_id).output

    async def add_step(
        self, tool: Undoable | str, args: Mapping[str, Any] | None = None, rule: Mapping[str, Any] | None = None
    ) -> StepView:
        """Register a step whose call someone else makes (an agent, through the journal's MCP server): durable
        before it returns, so the caller makes the call only after. Report its result with `complete_step` or
        `fail_step`. `rule`: how the caller will undo it (JSON; the proxy's policy rule, HATP-PXY-44), written in
        the same entry. Raises HatpError like `run`."""
        t = self._journal.tool(tool) if isinstance(tool, str) else self._journal.register(tool)
        call = await self._start(t, dict(args or {}), dict(rule) if rule is not None else None)
        return self._m.step(call.step_id)

    async def complete_step(self, step_id: str, output: Any = None, *, close: bool = False) -> StepView:
        """Raises HatpError HATP-JRN-1 (no such step, or not pending) or HATP-JRN-6 (it is in doubt). `close`: the
        saga completes in the same durable write (a call's saga of its own, Journal.one_call)."""
        await self._settle(StepCompleted(step_id=step_id, output=output), close)
        return self._m.step(step_id)

    async def fail_step(self, step_id: str, error: str, *, close: bool = False) -> StepView:
        """Raises HatpError HATP-JRN-1 (no such step, or not pending) or HATP-JRN-6 (it is in doubt). `close` as
        for `complete_step`."""
        await self._settle(StepFailed(step_id=step_id, error=error), close)
        return self._m.step(step_id)

    async def _settle(self, event: Event, close: bool) -> None:
        if not close:
            await self._feed(event)
            return
        async with self._lock:  # as `complete` takes it
            await self._feed(event, Complete())

    async def _start(self, t: Undoable, args: dict[str, Any], rule: dict[str, Any] | None = None) -> CallStep:
        step_id = f"s{self._m.step_count + 1}"  # (no await between here and the machine: the id is still free)
        event = StartStep(
            step_id=step_id,
            tool=t.name,
            args=args,
            has_undo=t.undo is not None,
            pivot=t.pivot,
            irreversible=t.irreversible,
            rule=rule,
        )
        cmds = await self._feed(event)
        return next(c for c in cmds if isinstance(c, CallStep))

    async def complete(self) -> None:
        """Close the saga COMPLETED. Raises HatpError HATP-JRN-6 while a step is pending or in doubt."""
        async with self._lock:
            await self._feed(Complete())

    async def rollback(self, reason: str = "rolled back on request") -> SagaStatus:
        """Undo what was done, last first, to the end (ROLLED_BACK or ROLLBACK_FAILED). Raises HatpError HATP-JRN-1
        when the saga is not in progress.

        Once begun it runs to its end even when the caller is cancelled (HATP-JRN-18): the cancellation takes effect
        after. The wait is bounded: each call by `call_timeout`, the retries by the saga's RetryPolicy."""
        async with self._lock:
            with anyio.CancelScope(shield=True):
                status = await self._drive(await self._feed(Rollback(reason=reason)))
            return status

    async def recover(self, policy: str) -> SagaStatus:
        async with self._lock:
            with anyio.CancelScope(shield=True):  # HATP-JRN-18, as rollback
                status = await self._drive(await self._feed(Recovered(policy=policy)))
            return status

    # -- the driver -----------------------------------------------------------------------------------------
    async def _feed(self, *events: Event) -> list[Command]:
        """Hand the events to the machine and make their entries durable, in one append, before anything else.

        From the machine to the store's queue nothing awaits, so events of one saga are decided and queued in one
        order, and several may wait for their writes at once (the store group-commits them, in that order). The
        caller gets the commands only once its entries are durable (HATP-JRN-2). An event the machine refuses
        after the first is raised once the entries of those before it are durable (memory and store agree)."""
        j = self._journal
        if self._broken is not None:
            raise HatpError(
                "HATP-JRN-2",
                f"saga {self.id}: an entry could not be made durable ({self._broken!r}); nothing more is done with it "
                "here: open the journal again to recover it from what its store holds",
                code="JOURNAL_NOT_DURABLE",
            )
        cmds = self._m.handle(events[0], j.clock.now())
        refused: HatpError | None = None
        for later in events[1:]:
            try:
                cmds += self._m.handle(later, j.clock.now())
            except HatpError as exc:
                refused = exc
                break
        try:
            at = format_ts(j.clock.now())
            signed: list[dict[str, Any]] = []
            for c in cmds:
                if isinstance(c, Write):
                    signed.append(self._chain.sign(c.event, at, c.body, signed))
            dead = [c.entry for c in cmds if isinstance(c, DeadLetter)]
            for ev in signed:  # the chain's head moves now: the next event queued follows these
                self._chain.appended(ev)
            signed, self._unwritten = [*self._unwritten, *signed], []
            written = j.store.submit(self.id, self._m.name, signed, dead) if signed or dead else None
        except BaseException as exc:
            self._broken = exc
            raise
        ids: list[int] = []
        if written is not None:
            try:
                ids = await written
            except BaseException as exc:  # the machine moved on, the store did not: the store is the truth
                self._broken = exc
                raise
        for entry, dl_id in zip(dead, ids, strict=True):
            self.dead_letters.append(entry)
            await j._alert(entry, dl_id)
        if refused is not None:
            raise refused
        return [c for c in cmds if not isinstance(c, (Write, DeadLetter))]

    async def _drive(self, cmds: list[Command]) -> SagaStatus:
        """Perform rollback's commands until the machine says it has finished (or, resuming, has nothing to do)."""
        j = self._journal
        queue = deque(cmds)
        while queue:
            c = queue.popleft()
            if isinstance(c, Finished):
                return c.status
            if isinstance(c, CallUndo):
                queue.extend(await self._feed(await j._undo(c)))
            elif isinstance(c, Lookup):
                queue.extend(await self._feed(await j._lookup(c)))
            elif isinstance(c, ArmRetry):
                await j.clock.sleep_until(parse_ts(c.at))
                queue.extend(await self._feed(RetryDue(step_id=c.step_id)))
            else:  # pragma: no cover - a CallStep comes only from StartStep, which run() handles itself
                raise RuntimeError(f"unexpected command {c!r} while rolling back")
        return self._m.status


class Journal:
    """Durable sagas. Open with `async with Journal(store, key, tools=...)`: that recovers every unfinished saga
    first (HATP-JRN-10: policy "rollback" by default, or "resume").

    `key`: the journal's signing key (role `journal`); `alert`: called with each dead-letter entry once it is
    durable (and again on the next open, if it raised); `call_timeout`: the bound on every tool call, on `clock`."""

    def __init__(
        self,
        store: JournalStore,
        key: SigningKey,
        *,
        tools: Iterable[Undoable] = (),
        clock: Clock | None = None,
        alert: Alert | None = None,
        retry: RetryPolicy | None = None,
        policy: str = "rollback",
        call_timeout: timedelta = timedelta(seconds=30),
        author: str = "journal://local",
    ) -> None:
        if "journal" not in key.roles:
            raise ValueError(f"the journal signs with a key whose roles include 'journal', not {list(key.roles)}")
        if policy not in ("rollback", "resume"):
            raise ValueError(f"recovery policy {policy!r} is neither 'rollback' nor 'resume'")
        self.store = store
        self.key = key
        self.clock: Clock = clock or SystemClock()
        self.alert = alert
        self.retry = retry or RetryPolicy()
        self.policy = policy
        self.call_timeout = call_timeout
        self.author = author
        self._tools: dict[str, Undoable] = {}
        self._open: dict[str, Saga] = {}
        self.recovered: dict[str, SagaStatus] = {}
        for t in tools:
            self.register(t)

    async def __aenter__(self) -> Journal:
        await self.recover()
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    # -- tools ----------------------------------------------------------------------------------------------
    def register(self, tool: Undoable, *, replace: bool = False) -> Undoable:
        """Know `tool` by name (recovery finds undos and lookups by the name the journal wrote); `replace` puts it
        in place of the one known by that name, for the steps started after (a step keeps the irreversibility and
        pivot it was started with). Raises ValueError for another tool under a name already taken."""
        known = self._tools.get(tool.name)
        if known is not None and known != tool and not replace:
            raise ValueError(f"another tool is already registered as {tool.name!r}")
        self._tools[tool.name] = tool
        return tool

    def tool(self, name: str) -> Undoable:
        t = self._tools.get(name)
        if t is None:
            raise HatpError("HATP-JRN-1", f"no tool named {name!r} is registered", code="UNKNOWN_TOOL", path="tool")
        return t

    def wrap(self, tools: Mapping[str, Undoable] | Iterable[Undoable]) -> dict[str, Callable[..., Awaitable[Any]]]:
        """The tools as plain async callables (`await wrapped["refund"](item="882")`) that run as steps of the
        saga of the enclosing `async with journal.saga(...)`. Raises RuntimeError when called outside one."""
        items = tools.values() if isinstance(tools, Mapping) else tools
        out: dict[str, Callable[..., Awaitable[Any]]] = {}
        for t in items:
            self.register(t)
            out[t.name] = self._wrapped(t)
        return out

    def _wrapped(self, t: Undoable) -> Callable[..., Awaitable[Any]]:
        async def call(**args: Any) -> Any:
            saga = _current.get()
            if saga is None:
                raise RuntimeError(f"tool {t.name!r} is journaled: call it inside `async with journal.saga(...)`")
            return await saga.run(t, args)

        call.__name__ = t.name
        return call

    # -- sagas ----------------------------------------------------------------------------------------------
    async def begin(self, name: str, saga_id: str | None = None, *, owner: str | None = None) -> Saga:
        """A new saga, its `saga.begin` durable (naming `owner`, the caller that began it, when given). Prefer
        `saga()`, which rolls back on an exception."""
        sid = saga_id or f"saga-{uuid.uuid4().hex[:16]}"
        if sid in self._open or await self.store.load(sid) is not None:
            raise HatpError("HATP-JRN-1", f"saga {sid!r} exists already", code="DUPLICATE_SAGA", path="sagaId")
        machine, cmds = SagaMachine.begin(sid, name, self.retry, owner)
        chain = JournalChain(sid, self.key, self.author)
        first = next(c for c in cmds if isinstance(c, Write))
        event = chain.sign(first.event, format_ts(self.clock.now()), first.body)
        await self.store.append(sid, name, [event])
        chain.appended(event)
        saga = Saga(self, machine, chain)
        self._open[sid] = saga
        return saga

    async def one_call(
        self, name: str, tool: Undoable | str, args: Mapping[str, Any], rule: Mapping[str, Any] | None = None
    ) -> tuple[Saga, StepView]:
        """A saga of one call's own (the proxy's call outside any saga, spec/proxy.md HATP-PXY-9): its `saga.begin`
        and its step's `step.started` made durable in one write, before the call goes out (HATP-JRN-25); end it
        with `complete_step(..., close=True)` or `fail_step(..., close=True)`, one write more. Raises HatpError like
        `Saga.add_step`; a step the machine refuses writes nothing, not even the begin."""
        sid = f"saga-{uuid.uuid4().hex[:16]}"
        machine, cmds = SagaMachine.begin(sid, name, self.retry)
        chain = JournalChain(sid, self.key, self.author)
        first = next(c for c in cmds if isinstance(c, Write))
        begun = chain.sign(first.event, format_ts(self.clock.now()), first.body)
        chain.appended(begun)  # (its step follows it in the chain; both are written by the step's append)
        saga = Saga(self, machine, chain, unwritten=[begun])
        step = await saga.add_step(tool, args, rule)
        self._open[sid] = saga
        return saga, step

    @asynccontextmanager
    async def saga(self, name: str, saga_id: str | None = None) -> AsyncIterator[Saga]:
        """Run a saga: completed when the block ends, rolled back (shielded: it finishes) when an exception
        leaves it, and then SagaRolledBack or SagaRollbackFailed is raised from the original failure."""
        saga = await self.begin(name, saga_id)
        token = _current.set(saga)
        try:
            yield saga
        except BaseException as exc:
            _current.reset(token)
            if saga.status is not SagaStatus.IN_PROGRESS:
                raise
            with anyio.CancelScope(shield=True):  # (taking the saga's lock would raise in a cancelled scope)
                status = await saga.rollback(f"{type(exc).__name__}: {exc}")
            if not isinstance(exc, Exception):
                raise  # a cancellation stays a cancellation, once the rollback is done
            raise self._outcome(saga, status, exc) from exc
        else:
            _current.reset(token)
            if saga.status is SagaStatus.IN_PROGRESS:
                await saga.complete()

    @staticmethod
    def _outcome(saga: Saga, status: SagaStatus, cause: BaseException | None) -> SagaError:
        if status is SagaStatus.ROLLED_BACK:
            return SagaRolledBack(saga.id, cause, saga.steps, saga.stopped_at)
        return SagaRollbackFailed(saga.id, cause, saga.steps, list(saga.dead_letters))

    def running(self, saga_id: str) -> Saga | None:
        """The saga of this id if this journal is running it (begun or recovered here), else None."""
        return self._open.get(saga_id)

    async def get(self, saga_id: str) -> Saga:
        """The saga of this id, from memory or rebuilt from the store. Raises HatpError HATP-JRN-1 (unknown) or
        HATP-JRN-12 (its stored record does not verify: nothing is done with it)."""
        if saga_id in self._open and not self._open[saga_id].broken:
            return self._open[saga_id]
        stored = await self.store.load(saga_id)
        if stored is None:
            raise HatpError("HATP-JRN-1", f"no saga {saga_id!r} in this journal", code="NO_SUCH_SAGA", path="sagaId")
        ring = Keyring()
        ring.add_signer(self.key)
        record = {"type": "hatp.journal", "sagaId": saga_id, "name": stored.name, "events": stored.events}
        problems = verify_journal(record, ring, require_closed=False)
        if problems:
            first = problems[0]
            raise HatpError(
                "HATP-JRN-12",
                f"the stored journal of saga {saga_id} does not verify ({first.rule} at event {first.index}: "
                f"{first.reason}); it is left untouched for a person",
                code="JOURNAL_TAMPERED",
            )
        machine = SagaMachine.replay(saga_id, [(e["event"], e["body"]) for e in stored.events])
        saga = Saga(self, machine, JournalChain(saga_id, self.key, self.author, stored.events))
        self._open[saga_id] = saga
        return saga

    def step_rule(self, key: str) -> dict[str, Any] | None:
        """The rule the step of `key` (its call's or its undo's idempotency key) was journaled with, from its
        `step.started` entry (HATP-PXY-44); None when its saga is not loaded, the step is unknown, or it was
        journaled without one. Reads memory only: a saga being rolled back or recovered is loaded."""
        step = key.removesuffix(":undo")
        for sid, saga in self._open.items():  # (a step's key begins with its saga's id: step_key)
            if step.startswith(f"{sid}:"):  # one saga's id may begin another's: look on until the step is found
                found = next((s for s in saga.steps if s.key == step), None)
                if found is not None:
                    return found.rule
        return None

    async def recover(self) -> dict[str, SagaStatus]:
        """Finish every saga the store holds unfinished (HATP-JRN-10), and alert dead letters not yet alerted.
        A saga whose stored record does not verify is not touched; the alert hook is told. Returns each saga's
        status after recovery."""
        for row in await self.store.dead_letters(unalerted_only=True):
            await self._alert(row.entry, row.id)
        for saga_id in await self.store.unfinished():
            if saga_id in self._open:
                continue
            try:
                saga = await self.get(saga_id)
            except HatpError as exc:
                await self._alert({"sagaId": saga_id, "phase": "recover", "error": exc.one_line()}, None)
                continue
            self.recovered[saga_id] = await saga.recover(self.policy)
        return dict(self.recovered)

    async def record(self, saga_id: str) -> dict[str, Any]:
        return (await self.get(saga_id)).record()

    # -- calling tools ----------------------------------------------------------------------------------------
    async def _call(self, fn: Callable[[], Awaitable[Any]] | Any, *args: Any) -> _Answer:
        """Call a tool function, bounded by call_timeout on the clock. Never raises for the tool's failure."""
        result: list[_Answer] = []
        deadline = self.clock.now() + self.call_timeout

        async def attempt() -> None:
            try:
                result.append(_Answer(True, await fn(*args)))
            except OutcomeUnknown as exc:
                result.append(_Answer(False, exc, f"{exc}", unknown=True))
            except UndoRefused as exc:
                result.append(_Answer(False, exc, f"refused: {exc}", final=True))
            except Exception as exc:  # the tool's failure is an answer; cancellation is not caught
                result.append(_Answer(False, exc, f"{type(exc).__name__}: {exc}"))
            tg.cancel_scope.cancel()

        async def watchdog() -> None:
            await self.clock.sleep_until(deadline)
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt)
            tg.start_soon(watchdog)
        if not result:
            return _Answer(False, None, f"no answer within {self.call_timeout.total_seconds():g}s", unknown=True)
        return result[0]

    async def _undo(self, c: CallUndo) -> UndoAnswered:
        t = self._tools.get(c.tool)
        if t is None or t.undo is None:
            why = "is not registered" if t is None else "declares no undo"
            return UndoAnswered(step_id=c.step_id, ok=False, error=f"tool {c.tool!r} {why}", retryable=False)
        a = await self._call(t.undo, c.args, c.output, c.key)
        out = a.value if a.ok else None
        return UndoAnswered(step_id=c.step_id, ok=a.ok, output=out, error=a.error, retryable=not a.final)

    async def _lookup(self, c: Lookup) -> LookupAnswered:
        t = self._tools.get(c.tool)
        if t is None or t.lookup is None:
            why = "is not registered" if t is None else "declares no lookup"
            return LookupAnswered(step_id=c.step_id, happened=None, error=f"tool {c.tool!r} {why}: outcome unknown")
        a = await self._call(t.lookup, c.args, c.key)
        if a.ok and isinstance(a.value, Happened):
            return LookupAnswered(step_id=c.step_id, happened=True, output=a.value.output)
        if a.ok and isinstance(a.value, DidNotHappen):
            return LookupAnswered(step_id=c.step_id, happened=False)
        error = a.error or f"the lookup of {c.tool!r} could not tell"
        return LookupAnswered(step_id=c.step_id, happened=None, error=error)

    async def _alert(self, entry: dict[str, Any], dead_letter_id: int | None) -> None:
        """Tell the alert hook; a dead letter counts as alerted only once the hook returned."""
        if self.alert is None:
            return
        try:
            out = self.alert(entry)
            if inspect.isawaitable(out):
                await out
        except Exception:  # a broken hook must not stop a rollback; the dead letter stays unalerted
            return
        if dead_letter_id is not None:
            await self.store.mark_alerted(dead_letter_id)

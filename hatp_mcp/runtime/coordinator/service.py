"""Transactions run in the background for an agent: begin returns once durable, status and abort by txnId.

`TxnService` wraps a CoordinatorRuntime. `begin(plan)` starts the transaction as a task in the service's task
group and returns as soon as the plan and its first record events are durable in the log (or raises the
validator's refusal, with nothing written). `status` reads the durable log (hatp_mcp.core.txn.status), so a
restarted coordinator answers the same. `abort` stops a transaction that has no decision yet and finishes it as
a replacement coordinator would (presumed abort). `recover_unfinished` does that for every transaction a stopped
coordinator left open. Protocol decisions are the coordinator machine's; this module only schedules and reads.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from hatp_mcp.core.gateway.agents import AgentKeys, card_of_key, sign_request
from hatp_mcp.core.model.agent import AgentCard
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.txn_api import TxnList, TxnStatus
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.core.txn.evidence_checks import check_plan_requester
from hatp_mcp.core.txn.machine import Config, Validator
from hatp_mcp.core.txn.record import RecordChain
from hatp_mcp.core.txn.status import decided, summarize
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.coordinator.driver import (
    BoundsAsker,
    CoordinatorRuntime,
    EscalateHook,
    TxnResult,
    UnjustifiedOutcome,
)
from hatp_mcp.runtime.coordinator.waiting_notes import WaitingNotes
from hatp_mcp.runtime.interfaces import Approver, Participant
from hatp_mcp.store.txn_log import LogEntry, LoggedTxn, TxnLeases, TxnLog

__all__ = ["MAX_WAIT_SECONDS", "TxnService"]

MAX_WAIT_SECONDS = 300


class _SignallingLog:
    """The runtime's log, with a signal after each append (`next_append`), or after the next that is durable
    (`durable=True`: forced; the begin is answered from it, HATP-TXN-27). Appends are shielded: a transaction that
    is cancelled (abort, shutdown) stops only after its last write is durable, so a replacement never races it."""

    def __init__(self, inner: TxnLog) -> None:
        self.inner = inner
        self._waiters: dict[str, list[tuple[anyio.Event, bool]]] = {}

    def next_append(self, txn_id: str, *, durable: bool = False) -> anyio.Event:
        event = anyio.Event()
        self._waiters.setdefault(txn_id, []).append((event, durable))
        return event

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        with anyio.CancelScope(shield=True):
            await self.inner.append(txn_id, entries, forced)
        kept: list[tuple[anyio.Event, bool]] = []
        for event, durable in self._waiters.pop(txn_id, []):
            if durable and not forced:
                kept.append((event, durable))
            else:
                event.set()
        if kept:
            self._waiters[txn_id] = kept

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return await self.inner.load(txn_id)

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()


@dataclass
class _Running:
    scope: anyio.CancelScope | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    refused: HatpError | None = None
    stopped: Exception | None = None  # what stopped it otherwise (a store that failed): its log stays as it was
    result: TxnResult | None = None


@dataclass
class _Beginning:
    """A begin in flight for one txnId: the digest of its plan, and its end (durable, or refused)."""

    digest: str
    done: anyio.Event = field(default_factory=anyio.Event)
    refused: HatpError | None = None


async def _either(a: anyio.Event, b: anyio.Event) -> None:
    """Return once either event is set."""
    async with anyio.create_task_group() as tg:

        async def watch(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(watch, a)
        tg.start_soon(watch, b)


def _unknown(txn_id: str) -> HatpError:
    return HatpError(
        "HATP-MCP-22",
        f"this coordinator knows no transaction {txn_id!r}",
        path="$.txnId",
        code="UNKNOWN_TXN",
        fix="begin the transaction first (hatp/txn/begin), or ask the coordinator that began it",
    )


class TxnService:
    """Begin, watch and abort transactions by txnId. Use inside `async with service.running():`."""

    def __init__(
        self,
        *,
        key: SigningKey,
        keyring: Keyring,
        participants: Mapping[str, Participant],
        approver: Approver | None,
        log: TxnLog,
        clock: Clock,
        config: Config | None = None,
        validator: Validator | None = None,
        on_escalate: EscalateHook | None = None,
        unbounded_call_seconds: float = 300.0,
        bounds: BoundsAsker | None = None,
        agents: AgentKeys | None = None,
        agent_key: SigningKey | None = None,
    ) -> None:
        """`agents` (the organisation's Directory-signed agent cards): with them, every plan's requester must be
        proven at begin (HATP-TXN-21), by the agent's signed request or, for a client that cannot sign, by
        `agent_key`, the agent's key this coordinator holds and signs with for its clients (as the agent its card
        names, for the person the card names: never as what the client writes). Raises ValueError when
        `agent_key` is on no card in `agents`."""
        self._agents = agents
        self._agent_card: AgentCard | None = None
        if agent_key is not None:
            self._agent_card = card_of_key(agents or AgentKeys(), agent_key)
            if self._agent_card is None:
                raise ValueError(f"agent key {agent_key.kid} is on no Directory-signed agent card")
        self._agent_key = agent_key
        self._clock = clock
        self._key = key
        # who each open ask waits for, as the gateway last said it (HATP-MCP-54): the status passes it on
        self._notes = WaitingNotes(approver) if approver is not None else None
        approver = self._notes
        self._approver = approver
        self.clock = clock  # the coordinator's time: deadlines, and the example plan it serves (agent_guide)
        self._log = _SignallingLog(log)
        # a log shared by several coordinators (HATP-STORE-4..6): this one drives only the transactions it leases
        self._leases: TxnLeases | None = log if isinstance(log, TxnLeases) else None
        self.config = config or Config()
        self.runtime = CoordinatorRuntime(
            key=key,
            keyring=keyring,
            participants=participants,
            approver=approver,
            log=self._log,
            clock=clock,
            config=self.config,
            validator=validator,
            on_escalate=on_escalate,
            unbounded_call_seconds=unbounded_call_seconds,
            bounds=bounds,
        )
        self._running: dict[str, _Running] = {}
        self._beginning: dict[str, _Beginning] = {}  # one begin per txnId at a time (HATP-MCP-21)
        self._tg: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[TxnService]:
        """The lifetime of background transactions. Leaving it cancels them after their current durable write;
        whatever is unfinished is finished by `recover_unfinished` on the next start."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if self._leases is not None:
                tg.start_soon(self._keep_leases, self._leases)
            try:
                yield self
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    # -- background tasks ---------------------------------------------------------------------------------
    async def _start(self, txn_id: str, fn: Callable[[], Awaitable[TxnResult]]) -> _Running:
        if self._tg is None:
            raise RuntimeError("TxnService is not running: use `async with service.running():`")
        run = _Running()
        self._running[txn_id] = run
        await self._tg.start(self._task, txn_id, fn, run)
        return run

    async def _task(
        self, txn_id: str, fn: Callable[[], Awaitable[TxnResult]], run: _Running, *, task_status: TaskStatus[None]
    ) -> None:
        try:
            with anyio.CancelScope() as scope:
                run.scope = scope
                task_status.started()
                try:
                    run.result = await fn()
                except HatpError as exc:
                    if exc.code != "STALE_COORDINATOR":  # begin refused the plan: nothing was written
                        run.refused = exc
                    else:  # HATP-STORE-5: another coordinator took it over; it finishes it
                        print(
                            f"coordinator: {txn_id} taken over ({exc.rule} {exc.code}): {exc.reason}",
                            file=sys.stderr,
                            flush=True,
                        )
                except UnjustifiedOutcome as exc:  # HATP-REC-17: its record stays open, `close.refused` says why
                    print(f"coordinator: {txn_id} left open: {exc}", file=sys.stderr, flush=True)
                except Exception as exc:  # one broken transaction must not stop the others; its log stays open
                    run.stopped = exc
                    print(f"coordinator: {txn_id} stopped: {exc!r}", file=sys.stderr, flush=True)
        finally:
            run.done.set()
            if self._running.get(txn_id) is run:
                del self._running[txn_id]
                if self._leases is not None:  # finished or stopped: its lease lapses, and it is taken over if open
                    self._leases.release(txn_id)

    async def recover_unfinished(self) -> list[str]:
        """HATP-MCP-24: finish every transaction the log holds open (presumed abort if undecided). On a shared log
        only those whose lease lapsed, taken over at the next epoch (HATP-STORE-6); the others have a live owner."""
        if self._leases is not None:
            taken = await self._leases.take_lapsed(64, exclude=list(self._running))
            ids = [lease.txn_id for lease in taken]
        else:
            ids = [t for t in await self._log.unfinished() if t not in self._running]
        for txn_id in ids:
            await self._start(txn_id, lambda t=txn_id: self.runtime.recover(t))  # type: ignore[misc]
        return ids

    async def _keep_leases(self, leases: TxnLeases) -> None:
        """HATP-STORE-4: renew this coordinator's leases at a third of their length; stop driving any another
        coordinator took over; take over lapsed ones. A store that fails is tried again next round (a lease not
        renewed lapses, and its transaction is taken over: fencing keeps that safe)."""
        every = timedelta(seconds=max(leases.lease_seconds / 3, 0.05))
        while True:
            await self._clock.sleep_until(self._clock.now() + every)
            try:
                for txn_id in await leases.renew():
                    run = self._running.get(txn_id)
                    if run is not None and run.scope is not None:
                        print(f"coordinator: {txn_id} taken over (lease lost): stopped", file=sys.stderr, flush=True)
                        run.scope.cancel()
                await self.recover_unfinished()
            except Exception as exc:  # the store did not answer: the pool reconnects, the next round tries again
                print(f"coordinator: lease round failed: {exc!r}", file=sys.stderr, flush=True)

    # -- the operations -----------------------------------------------------------------------------------
    def _prove_requester(self, plan: Plan, request: object) -> None:
        """HATP-TXN-21 when agent cards are configured; else nothing is proven (and nothing claims it is)."""
        if self._agents is None:
            return
        now = self._clock.now()
        if request is None and self._agent_key is not None and self._agent_card is not None:
            card = self._agent_card  # signs as its own card says, whatever the plan names
            request = sign_request(
                self._agent_key, card.id, card.acts_for, "plan", plan.digest(), now, nonce=secrets.token_urlsafe(18)
            ).wire()
        check_plan_requester(plan, plan.digest(), request, self._agents, now)

    @property
    def agent_card(self) -> AgentCard | None:
        """The agent card this coordinator signs plans as for clients that cannot sign (None: it signs none)."""
        return self._agent_card

    async def begin(self, plan: Plan, request: object = None) -> TxnStatus:
        """HATP-MCP-20/21. `request` is the agent's signed AgentRequest about this plan (HATP-TXN-21). Raises
        HatpError: HATP-TXN-21 (the requester is not proven, nothing written), HATP-TXN-1 (invalid plan, nothing
        written), HATP-MCP-21 (another plan under this txnId, begun or being begun), or what the coordinator
        machine refuses at begin.

        One begin per txnId at a time: a second begin that arrives while the first is not yet durable is refused
        at once for another plan, and for the same plan answered as the first is (its status, or its refusal)."""
        self._prove_requester(plan, request)
        txn_id = plan.txn_id
        digest = plan.digest()
        ongoing = self._beginning.get(txn_id)  # checked and claimed with no await between: no second run slips in
        if ongoing is not None:
            if ongoing.digest != digest:
                raise self._mismatch(txn_id, ongoing.digest)
            await ongoing.done.wait()  # bounded: the first begin ends once durable or refused
            if ongoing.refused is not None:
                raise ongoing.refused
            return await self.status(txn_id)
        ongoing = self._beginning[txn_id] = _Beginning(digest)
        try:
            return await self._begin(plan, digest)
        except HatpError as exc:
            ongoing.refused = exc
            raise
        finally:
            del self._beginning[txn_id]
            ongoing.done.set()

    async def _begin(self, plan: Plan, digest: str) -> TxnStatus:
        """The one begin in flight for the plan's txnId (see `begin`)."""
        txn_id = plan.txn_id
        logged = await self._log.load(txn_id)
        if logged is not None:
            known = Plan.model_validate(logged.plan).digest()
            if known != digest:
                raise self._mismatch(txn_id, known)
            return await self.status(txn_id)
        durable = self._log.next_append(txn_id, durable=True)  # the begin, durable (HATP-TXN-27, HATP-MCP-20)
        run = await self._start(txn_id, lambda: self.runtime.run(plan))
        await _either(durable, run.done)
        if not durable.is_set():
            if run.refused is not None:
                raise run.refused
            if run.stopped is not None:  # HATP-MCP-67: the write failed, it is not an unknown txnId
                await self._begun_despite(txn_id, run.stopped)
        return await self.status(txn_id)

    async def _begun_despite(self, txn_id: str, stopped: Exception) -> None:
        """HATP-MCP-67: the begin's write failed (the store went away, or its commit's answer was lost). Return if
        the log holds the transaction after all (its lease lapses and it is taken over, HATP-STORE-6); else raise
        HatpError STORE_UNAVAILABLE: whether it was begun is unknown here, and the same begin again settles it."""
        try:
            if await self._log.load(txn_id) is not None:
                return
            known = "the log does not hold it: nothing was begun"
        except Exception as exc:
            known = f"the log could not be read either ({type(exc).__name__}): it may or may not hold it"
        raise HatpError(
            "HATP-MCP-67",
            f"the log did not confirm the begin of {txn_id} ({type(stopped).__name__}); {known}",
            path="$.txnId",
            code="STORE_UNAVAILABLE",
            fix="send the same begin again (same txnId and plan): it begins the transaction, or answers its status "
            "if the log holds it",
        )

    @staticmethod
    def _mismatch(txn_id: str, digest: str) -> HatpError:
        return HatpError(
            "HATP-MCP-21",
            f"transaction {txn_id} was begun with another plan ({digest})",
            path="$.txnId",
            code="PLAN_MISMATCH",
            fix="use a new txnId for a new plan",
        )

    async def status(self, txn_id: str, wait_seconds: float = 0, after_events: int | None = None) -> TxnStatus:
        """HATP-MCP-22: from the durable log. `wait_seconds` waits (bounded) for the transaction's outcome first
        (HATP-MCP-66: once it is decided, for its record to close) or, with `after_events`, for its record to hold
        more events than that. Raises HatpError HATP-MCP-22."""
        with anyio.move_on_after(min(wait_seconds, MAX_WAIT_SECONDS)):  # a transport bound, not a deadline
            until_closed: bool | None = None  # set at the first look: was the outcome already decided?
            while wait_seconds > 0:
                run = self._running.get(txn_id)
                if run is None:
                    break
                appended = self._log.next_append(txn_id)  # before the read: no append slips between them
                logged = await self._log.load(txn_id)
                if logged is not None:
                    if after_events is not None:
                        if len(logged.events) > after_events:
                            break
                    else:
                        told = decided(logged.events) is not None
                        until_closed = told if until_closed is None else until_closed
                        if logged.closed or (told and not until_closed):  # HATP-MCP-66
                            break
                await _either(appended, run.done)
        logged = await self._log.load(txn_id)
        if logged is None:
            raise _unknown(txn_id)
        return self._summary(logged)

    def _summary(self, logged: LoggedTxn, *, with_record: bool = True) -> TxnStatus:
        plan = Plan.model_validate(logged.plan)
        digest = plan.digest()  # once, for the record and the status
        record: dict[str, Any] | None = None
        if logged.closed and with_record:
            record = RecordChain(plan, self._key, self.config.coordinator, logged.events, digest).record()
        asked = self._notes.waiting(plan.txn_id) if self._notes is not None else None
        return summarize(plan, logged.events, logged.decision, record, digest, asked, self.clock.now())

    async def requester_of(self, txn_id: str) -> str:
        """The agent whose transaction this is: its plan's `requester.agent` (HATP-MCP-53). Raises HatpError
        HATP-MCP-22 (UNKNOWN_TXN)."""
        logged = await self._log.load(txn_id)
        if logged is None:
            raise _unknown(txn_id)
        return Plan.model_validate(logged.plan).requester.agent

    async def abort(self, txn_id: str, reason: str | None = None, by: str | None = None) -> TxnStatus:
        """HATP-MCP-23: abort before the decision (presumed abort, as a replacement coordinator would finish it).
        `by`: who asked, as its caller was proven (HATP-MCP-53); None: the plan's agent (its stdio parent).

        Raises HatpError HATP-MCP-22 (UNKNOWN_TXN) or HATP-MCP-23 (ILLEGAL_TRANSITION: commit is decided).
        """
        logged = await self._log.load(txn_id)
        if logged is None:
            raise _unknown(txn_id)
        if logged.decision == "commit" or (logged.closed and self._summary(logged).outcome != "ABORTED"):
            raise self._too_late(txn_id)
        if logged.closed or logged.decision == "abort":
            return self._summary(logged)
        run = self._running.get(txn_id)
        if run is not None and run.scope is not None:
            run.scope.cancel()  # returns after its current durable write (the log's appends are shielded)
            await run.done.wait()
        logged = await self._log.load(txn_id)
        if logged is None:
            raise BrokenInvariant(f"transaction {txn_id} was in the log a moment ago and is gone")
        if logged.decision == "commit":  # decided while we stopped it: finish the commit, refuse the abort
            await self._start(txn_id, lambda: self.runtime.recover(txn_id))
            raise self._too_late(txn_id)
        decided = self._log.next_append(txn_id)
        # HATP-TXN-18: the request is an event of the record (who asked, as proven; the coordinator attests it)
        request = {"reason": reason, "by": by or Plan.model_validate(logged.plan).requester.agent}
        run = await self._start(txn_id, lambda: self.runtime.recover(txn_id, request))
        await _either(decided, run.done)
        status = await self.status(txn_id)
        await self._withdraw_pending(status)
        return status

    async def _withdraw_pending(self, status: TxnStatus) -> None:
        """Withdraw the asks still pending: a replacement's presumed abort does not know them from the record."""
        if self._approver is None:
            return
        for vote in status.votes:
            if vote.decision == "pending":
                try:
                    await self._approver.withdraw(status.txn_id, vote.branch_id)
                except Exception as exc:  # a notification: the abort is decided and durable already
                    print(f"coordinator: withdrawing {vote.branch_id} failed: {exc!r}", file=sys.stderr)

    @staticmethod
    def _too_late(txn_id: str) -> HatpError:
        return HatpError(
            "HATP-MCP-23",
            f"transaction {txn_id}: commit is decided; it can no longer be aborted",
            path="$.txnId",
            code="ILLEGAL_TRANSITION",
            fix="wait for the outcome (hatp/txn/status); undo a committed trip with a new transaction",
        )

    async def pending(self, agent: str | None = None) -> TxnList:
        """Every transaction whose record is not closed, oldest first (without records); with `agent`, only
        those whose plan's requester is that agent (HATP-MCP-53)."""
        out = []
        for txn_id in await self._log.unfinished():
            logged = await self._log.load(txn_id)
            if logged is None:
                continue
            if agent is not None and Plan.model_validate(logged.plan).requester.agent != agent:
                continue
            out.append(self._summary(logged, with_record=False))
        return TxnList(txns=out)

    async def wait(self, txn_id: str) -> TxnStatus:
        """Wait (unbounded: bound it with anyio.fail_after) for the transaction to end; its final status."""
        run = self._running.get(txn_id)
        if run is not None:
            await run.done.wait()
        return await self.status(txn_id)

"""HATP-TXN-4 against a log whose writes are held open: a forced write's requests reach no participant before
it is durable, and a write that fails sends nothing it gated (hatp_mcp/runtime/coordinator/driver.py `_execute`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import pytest

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.messages import (
    AbortRequest,
    CommitRequest,
    CompensateRequest,
    PrepareRequest,
    RenewRequest,
)
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime, default_validator
from hatp_mcp.runtime.participant.driver import ParticipantRuntime
from hatp_mcp.store.txn_log import LogEntry, MemoryTxnLog
from tests.txn_helpers import settle

pytestmark = pytest.mark.anyio


class _HeldLog(MemoryTxnLog):
    """A log whose writes stay open until `release` is set; `writing` says one has started. `fail` makes the
    held write fail instead of completing."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()
        self.release = asyncio.Event()
        self.fail = False
        self.durable: list[str] = []  # what each completed write carried, in order (`event` names)

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        self.writing.set()
        await self.release.wait()
        if self.fail:
            raise OSError("the disk is gone")
        await super().append(txn_id, entries, forced)
        self.durable += [str(e.payload.get("event", e.kind)) for e in entries]


class _Recording:
    """A participant that records each request's arrival, next to how many log writes were durable then and
    whether the decision was one of them."""

    def __init__(self, inner: ParticipantRuntime, log: _HeldLog, seen: list[str]) -> None:
        self._inner = inner
        self._log = log
        self._seen = seen

    def _arrived(self, method: str, req: Any) -> Any:
        decided = "decision" in self._log.durable
        self._seen.append(f"arrived {method} {req.branch_id} durable={len(self._log.durable)} decided={decided}")
        return getattr(self._inner, method)(req)

    async def prepare(self, req: PrepareRequest) -> Any:
        return await self._arrived("prepare", req)

    async def commit(self, req: CommitRequest) -> Any:
        return await self._arrived("commit", req)

    async def abort(self, req: AbortRequest) -> Any:
        return await self._arrived("abort", req)

    async def compensate(self, req: CompensateRequest) -> Any:
        return await self._arrived("compensate", req)

    async def renew(self, req: RenewRequest) -> Any:
        return await self._arrived("renew", req)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _coordinator(world: World, log: _HeldLog, seen: list[str]) -> CoordinatorRuntime:
    return CoordinatorRuntime(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants={uri: _Recording(p, log, seen) for uri, p in world.participants.items()},
        approver=world.approver,
        log=log,
        clock=world.clock,
        config=Config(coordinator="coordinator://acme.com/c1"),
        validator=default_validator(),
    )


async def _run_held(
    runtime: CoordinatorRuntime, log: _HeldLog, clock: FakeClock, while_held: Callable[[], None]
) -> Any:
    """Run a trip whose first write `log` holds open; `while_held` asserts what stands once every task has done what
    it can in that window; then the write goes on. The run's TxnResult, or the OSError it raised."""
    ended: list[Any] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    ended.append(await runtime.run(trip_plan(clock.now())))
                except OSError as exc:
                    ended.append(exc)

            tg.start_soon(run)
            await log.writing.wait()
            await settle()  # every task has done what it can while the write is held open
            while_held()
            log.release.set()
    return ended[0]


async def test_no_prepare_reaches_a_participant_before_the_begin_is_written_HATP_TXN_4(
    clock: FakeClock,
) -> None:
    log = _HeldLog()
    world = build_world(clock, log=log)
    seen: list[str] = []
    runtime = _coordinator(world, log, seen)

    def nothing_sent() -> None:
        assert seen == [] and world.seat.effects == [] and world.pay.effects == []  # nothing was sent

    result = await _run_held(runtime, log, clock, nothing_sent)
    assert result.outcome is Outcome.COMMITTED
    arrived = [s for s in seen if s.startswith("arrived")]
    assert len(arrived) == 8 and all(not s.endswith("durable=0") for s in arrived), seen
    # the calendar's commit (the first phase-2 message) arrives only once the decision is durable
    assert all(s.endswith("decided=True") for s in seen if " commit " in s), seen


async def test_a_write_that_fails_sends_nothing_it_gated_HATP_TXN_4(clock: FakeClock) -> None:
    log = _HeldLog()
    log.fail = True
    world = build_world(clock, log=log)
    seen: list[str] = []
    runtime = _coordinator(world, log, seen)
    failed = await _run_held(runtime, log, clock, lambda: None)  # then the begin write fails
    assert isinstance(failed, OSError) and str(failed) == "the disk is gone"
    assert seen == []  # nothing it gated was sent
    assert world.effects() == {"seat": [], "room": [], "event": [], "pay": []}

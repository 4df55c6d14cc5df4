"""HATP-TXN-4 with staged participants: requests are built and signed while the write that gates them is on its
way to disk, and sent only once it is durable (hatp_mcp/runtime/coordinator.py `_execute`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
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
from hatp_mcp.runtime.coordinator import CoordinatorRuntime, default_validator
from hatp_mcp.runtime.participant import ParticipantRuntime
from hatp_mcp.store.txn_log import LogEntry, MemoryTxnLog
from tests.txn_helpers import drive, settle

pytestmark = pytest.mark.anyio

_METHODS = {
    PrepareRequest: "prepare",
    CommitRequest: "commit",
    AbortRequest: "abort",
    CompensateRequest: "compensate",
    RenewRequest: "renew",
}


class _HeldLog(MemoryTxnLog):
    """A log whose writes stay open until `release` is set; `writing` says one has started. `fail` makes the
    held write fail instead of completing."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = asyncio.Event()
        self.release = asyncio.Event()
        self.fail = False
        self.durable: list[str] = []  # what each completed write carried, in order (`event` names)

    async def append(self, txn_id: str, entries: Sequence[LogEntry]) -> None:
        self.writing.set()
        await self.release.wait()
        if self.fail:
            raise OSError("the disk is gone")
        await super().append(txn_id, entries)
        self.durable += [str(e.payload.get("event", e.kind)) for e in entries]


class _Staging:
    """A participant that builds its requests early (`staged`), recording when each was built and when each
    arrived, next to how many log writes were durable at that moment."""

    def __init__(self, inner: ParticipantRuntime, log: _HeldLog, seen: list[str]) -> None:
        self._inner = inner
        self._log = log
        self._seen = seen

    def _note(self, what: str, method: str, branch_id: str) -> None:
        decided = "decision" in self._log.durable
        self._seen.append(f"{what} {method} {branch_id} durable={len(self._log.durable)} decided={decided}")

    def staged(self, req: Any) -> Callable[[], Awaitable[Any]]:
        method = _METHODS[type(req)]
        self._note("built", method, req.branch_id)

        async def send() -> Any:
            self._note("arrived", method, req.branch_id)
            return await getattr(self._inner, method)(req)

        return send

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _coordinator(world: World, log: _HeldLog, seen: list[str]) -> CoordinatorRuntime:
    return CoordinatorRuntime(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants={uri: _Staging(p, log, seen) for uri, p in world.participants.items()},
        approver=world.approver,
        log=log,
        clock=world.clock,
        config=Config(coordinator="coordinator://acme.com/c1"),
        validator=default_validator(),
    )


async def test_prepares_are_built_while_begin_is_written_and_sent_only_once_it_is_durable_HATP_TXN_4(
    clock: FakeClock,
) -> None:
    log = _HeldLog()
    world = build_world(clock, log=log)
    seen: list[str] = []
    runtime = _coordinator(world, log, seen)
    result: list[Any] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                result.append(await runtime.run(trip_plan(clock.now())))

            tg.start_soon(run)
            await log.writing.wait()
            await settle()  # every task has done what it can while the begin write is held open
            assert sorted(seen) == [
                f"built prepare {b} durable=0 decided=False" for b in ("event", "pay", "room", "seat")
            ]
            assert world.seat.effects == [] and world.pay.effects == []  # nothing reached a participant
            log.release.set()
    assert result[0].outcome is Outcome.COMMITTED
    arrived = [s for s in seen if s.startswith("arrived")]
    assert len(arrived) == 8 and all(not s.endswith("durable=0") for s in arrived), seen
    # the calendar's commit (the first phase-2 message) is built while the decision is being written, and
    # arrives only once the decision is durable
    calendar = [s.rsplit(" ", 1)[-1] for s in seen if " commit event " in s]
    assert calendar == ["decided=False", "decided=True"], seen


async def test_a_write_that_fails_sends_nothing_it_gated_HATP_TXN_4(clock: FakeClock) -> None:
    log = _HeldLog()
    log.fail = True
    world = build_world(clock, log=log)
    seen: list[str] = []
    runtime = _coordinator(world, log, seen)
    failed: list[BaseException] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                try:
                    await runtime.run(trip_plan(clock.now()))
                except OSError as exc:
                    failed.append(exc)

            tg.start_soon(run)
            await log.writing.wait()
            await settle()
            assert len(seen) == 4  # the prepares are built while the begin write is held open
            log.release.set()  # ... and then it fails
    assert [str(e) for e in failed] == ["the disk is gone"]
    assert len(seen) == 4 and all(s.startswith("built prepare") for s in seen), seen  # built, never sent
    assert world.effects() == {"seat": [], "room": [], "event": [], "pay": []}


class _Forwarding:
    """A wrapper that counts the commits it sees and passes everything else on (`__getattr__`), as test and bench
    wrappers do: the coordinator must call its `commit`, not the inner participant's `staged`."""

    def __init__(self, inner: _Staging, commits: list[str]) -> None:
        self._inner = inner
        self._commits = commits

    async def commit(self, req: CommitRequest) -> Any:
        self._commits.append(req.branch_id)
        return await self._inner.staged(req)()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_a_wrapper_that_passes_attributes_on_is_called_itself_not_bypassed_by_its_inner_staged(
    clock: FakeClock,
) -> None:
    log = _HeldLog()
    log.release.set()
    world = build_world(clock, log=log)
    seen: list[str] = []
    commits: list[str] = []
    wrapped = {uri: _Forwarding(_Staging(p, log, seen), commits) for uri, p in world.participants.items()}
    runtime = CoordinatorRuntime(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=wrapped,
        approver=world.approver,
        log=log,
        clock=world.clock,
        config=Config(coordinator="coordinator://acme.com/c1"),
        validator=default_validator(),
    )
    result = await drive(clock, lambda: runtime.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    assert sorted(commits) == ["event", "pay", "room", "seat"]

"""Two coordinators on one PostgreSQL log, sharing one coordinator id (spec/store.md HATP-STORE-4..6, fencing
HATP-TRUST-9): A begins the trip and is paused after its decision, as its commits leave; its lease lapses; B takes
the transaction over at epoch 2, recovers it from the log and finishes it; then A's paused commits go out. The
participants (MCP servers that trust the coordinator id) refuse them as a stale coordinator's, and A's appends are
refused by the log. Paused by a gate in front of A's commit calls, not by timing; the real-process version with
SIGSTOP is tests/e2e/test_coordinator_fencing_processes.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from mcp import Client
from mcp.server import MCPServer

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.messages import BranchResult, CommitRequest
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.extension import HatpSettings
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.mcp.participant_server import serve_hatp
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime, default_validator
from hatp_mcp.runtime.coordinator_trust import RequestSigner, TrustedCoordinators
from hatp_mcp.runtime.interfaces import Participant
from hatp_mcp.store.postgresql.txn_log import PostgresTxnLog
from hatp_mcp.store.txn_log import Lease
from tests.txn_helpers import drive, settle

C1 = "coordinator://acme.com"
TXN = "txn-trip-0001"


class PausedCommits:
    """A's route to one participant: its commits wait at the gate (A is paused), then go out; what the
    participant answered them is kept."""

    def __init__(self, inner: Participant, gate: anyio.Event, reached: Callable[[], None]) -> None:
        self._inner = inner
        self._gate = gate
        self._reached = reached
        self.late: list[BaseException | BranchResult] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit(self, req: CommitRequest) -> BranchResult:
        self._reached()
        await self._gate.wait()
        try:
            result = await self._inner.commit(req)
        except HatpError as exc:
            self.late.append(exc)
            raise
        self.late.append(result)
        return result


@asynccontextmanager
async def servers(world: World) -> AsyncIterator[dict[str, MCPServer]]:
    out: dict[str, MCPServer] = {}
    for uri, runtime in world.participants.items():
        server = MCPServer(uri, log_level="WARNING")
        pinned = Keyring()
        pinned.add_signer(world.keys["coordinator"], C1)
        serve_hatp(server, runtime, HatpSettings(roles=["participant"]), trust=TrustedCoordinators(pinned, world.clock))
        out[uri] = server
    yield out


async def coordinator(
    stack: AsyncExitStack, world: World, found: dict[str, MCPServer], log: PostgresTxnLog
) -> tuple[CoordinatorRuntime, dict[str, Participant]]:
    sign = RequestSigner(world.keys["coordinator"], C1, world.clock, log.epoch).sign  # the lease's epoch
    routes: dict[str, Participant] = {}
    for uri, server in found.items():
        client = await stack.enter_async_context(Client(server))
        routes[uri] = mcp_participant(uri, client, world.keyring, verify=False, signer=sign)
    runtime = CoordinatorRuntime(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=routes,
        approver=world.approver,
        log=log,
        clock=world.clock,
        config=Config(coordinator=C1),
        validator=default_validator(),
    )
    return runtime, routes


@pytest.mark.anyio
async def test_HATP_TRUST_9_a_coordinator_paused_past_its_lease_is_fenced_after_another_took_over(
    clock: FakeClock, pg_url: str
) -> None:
    world = build_world(clock)
    a_log = await PostgresTxnLog.open(pg_url, "A", lease_seconds=0)  # A's lease lapses as soon as it is taken
    b_log = await PostgresTxnLog.open(pg_url, "B", lease_seconds=300)
    gate, reached = anyio.Event(), anyio.Event()
    try:
        async with AsyncExitStack() as stack, servers(world) as found:
            a, a_routes = await coordinator(stack, world, found, a_log)
            paused = {uri: PausedCommits(r, gate, reached.set) for uri, r in a_routes.items()}
            a = CoordinatorRuntime(
                key=world.keys["coordinator"],
                keyring=world.keyring,
                participants=paused,
                approver=world.approver,
                log=a_log,
                clock=clock,
                config=Config(coordinator=C1),
                validator=default_validator(),
            )
            b, _ = await coordinator(stack, world, found, b_log)
            a_failed: list[BaseException] = []

            async def run_a() -> None:
                try:
                    await a.run(trip_plan(clock.now()))
                except HatpError as exc:
                    a_failed.append(exc)

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(run_a)
                    for _ in range(200):  # A runs until its decision is durable and its commits are leaving
                        await settle()
                        while not a_log.idle:
                            await anyio.lowlevel.checkpoint()
                        if reached.is_set():
                            break
                        clock.advance(5)
                    assert reached.is_set() and a_log.epoch(TXN) == 1
                    assert world.effects()["pay"] == []  # nothing committed yet

                    # B takes the lapsed lease over and finishes the transaction from the log
                    assert await b_log.take_lapsed(10) == [Lease(TXN, 2)]
                    result = await drive(clock, lambda: b.recover(TXN), busy=lambda: not b_log.idle)
                    assert result.outcome is Outcome.COMMITTED
                    assert world.effects()["pay"] == [f"capture {TXN}"]

                    gate.set()  # A wakes up and its commits go out, signed at epoch 1
                    for _ in range(200):
                        await settle()
                        if a_failed:
                            break
                        while not a_log.idle:
                            await anyio.lowlevel.checkpoint()
                        await anyio.lowlevel.checkpoint()
    finally:
        await a_log.aclose()
        await b_log.aclose()

    late = [x for p in paused.values() for x in p.late]
    assert late  # the commits A had sent when it was paused (the trip commits its branches in order)
    assert all(isinstance(x, HatpError) and x.code == "STALE_COORDINATOR" for x in late), late
    assert all("driven at coordinator epoch 2" in str(x) for x in late)
    # A's append of what happened to its commits is refused by the log (HATP-STORE-5): A stopped
    assert [(e.rule, e.code) for e in a_failed if isinstance(e, HatpError)] == [("HATP-STORE-5", "STALE_COORDINATOR")]
    assert world.effects()["pay"] == [f"capture {TXN}"]  # no effect twice
    assert all(len(done) == len(set(done)) for done in world.effects().values()), world.effects()
    assert verify_record(result.record, world.keyring) == []

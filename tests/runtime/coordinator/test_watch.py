"""The coordinator runtime's long poll on a pending approval (HATP-MCP-40): the decision reaches the machine when
the gateway has it, not at the next poll; polling (HATP-TXN-7) stays as the fallback, and an approver that
answers without holding is polled, never hammered. On a fake clock that never moves, unless a test moves it."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
import pytest

from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import TxnResult
from hatp_mcp.runtime.coordinator.scripted_approver import HumanScript, ScriptedApprover
from hatp_mcp.runtime.interfaces import ApproverAnswer
from tests.txn_helpers import drive, settle

pytestmark = pytest.mark.anyio


@dataclass
class HoldingApprover(ScriptedApprover):
    """A scripted gateway whose long poll is held until `decide` is set; then the human has approved."""

    decide: anyio.Event = field(default_factory=anyio.Event)
    waits: int = 0
    holds: bool = True

    async def wait(self, txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
        self.waits += 1
        if self.holds:
            await self.decide.wait()
            self.scripts[requirement_id] = HumanScript("approve")
        return await self.poll(txn_id, requirement_id)


async def test_the_decision_commits_through_the_long_poll_with_no_poll_due_and_the_clock_standing_still(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    approver = HoldingApprover(world.keys["gateway"], clock, scripts={"finance": HumanScript("never")})
    world.approver = approver
    coord = world.coordinator(Config(coordinator="coordinator://acme.com/c1", poll_seconds=3600))
    result: list[TxnResult] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                result.append(await coord.run(trip_plan(clock.now())))

            tg.start_soon(run)
            await settle()
            assert result == [] and approver.waits == 1  # pending, one long poll held
            assert [c[0] for c in approver.calls].count("poll") == 0
            approver.decide.set()
    assert result[0].outcome is Outcome.COMMITTED
    assert [c[0] for c in approver.calls].count("poll") == 1  # the long poll's own read; no timer poll fired
    votes = [e["evidence"]["decision"] for e in result[0].record["events"] if e["body"].get("branchId") == "finance"]
    assert votes == ["pending", "yes"]
    assert verify_record(result[0].record, world.keyring) == []


async def test_an_approver_that_answers_a_long_poll_without_holding_is_polled_on_the_timer_not_hammered(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    approver = HoldingApprover(
        world.keys["gateway"], clock, scripts={"finance": HumanScript(after_seconds=600)}, holds=False
    )
    world.approver = approver
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    timer_polls = sum(c[0] == "poll" for c in approver.calls) - approver.waits  # each wait reads once too
    assert timer_polls >= 600 // 30 - 1  # HATP-TXN-7 carries on alone
    assert approver.waits <= timer_polls + 1  # one try per pending answer, never a loop

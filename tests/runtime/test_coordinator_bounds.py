"""The coordinator runtime asks each participant's bounds at begin and refuses a plan that assumes more time than
they offer (HATP-MODE-9), over in-memory participants on the fake clock."""

from __future__ import annotations

import anyio
import pytest

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.coordinator import Config
from hatp_mcp.core.coordinator_events import Outcome
from hatp_mcp.core.model.estimate import OperationBounds
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator import BoundsAsker, CoordinatorRuntime
from tests.txn_helpers import drive


def with_bounds(world: World, ask: BoundsAsker) -> CoordinatorRuntime:
    return CoordinatorRuntime(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=dict(world.participants),
        approver=world.approver,
        log=world.log,
        clock=world.clock,
        config=Config(coordinator="coordinator://acme.com/c1"),
        bounds=ask,
    )


def asker(max_lease: int | None, asked: list[tuple[str, str]], fail: str | None = None) -> BoundsAsker:
    async def ask(participant: str, plan: Plan, branch_id: str) -> OperationBounds:
        asked.append((participant, branch_id))
        if branch_id == fail:
            raise HatpError("HATP-MCP-19", "no such operation", code="UNSUPPORTED")
        b = plan.branch(branch_id)
        return OperationBounds(
            txn_id=plan.txn_id,
            branch_id=branch_id,
            operation=b.operation,
            tier=b.tier,
            max_lease_seconds=max_lease,
            max_duration_seconds=b.max_duration_seconds,
        )

    return ask


@pytest.mark.anyio
async def test_HATP_MODE_9_a_lease_beyond_the_participants_is_refused_at_begin_before_anything_is_sent(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    asked: list[tuple[str, str]] = []
    with anyio.fail_after(10), pytest.raises(HatpError) as err:
        await with_bounds(world, asker(600, asked)).run(trip_plan(clock.now()))
    assert (err.value.rule, err.value.code, err.value.path) == (
        "HATP-MODE-9",
        "BOUNDS_EXCEEDED",
        "$.branches[0].leaseSeconds",
    )
    assert sorted(b for _p, b in asked) == ["event", "pay", "room", "seat"]  # one call per branch
    assert await world.log.unfinished() == []
    assert [c[0] for c in world.approver.calls] == ["estimate"] and world.seat.effects == []  # no one was asked


@pytest.mark.anyio
async def test_HATP_MODE_9_a_participant_that_gives_no_bounds_fails_closed(clock: FakeClock) -> None:
    world = build_world(clock)
    with anyio.fail_after(10), pytest.raises(HatpError) as err:
        await with_bounds(world, asker(None, [], fail="pay")).run(trip_plan(clock.now()))
    assert (err.value.rule, err.value.code) == ("HATP-MODE-9", "NO_BOUNDS")
    assert await world.log.unfinished() == [] and world.seat.effects == []


@pytest.mark.anyio
async def test_a_plan_within_the_participants_bounds_commits(clock: FakeClock) -> None:
    world = build_world(clock)
    coord = with_bounds(world, asker(900, []))
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED

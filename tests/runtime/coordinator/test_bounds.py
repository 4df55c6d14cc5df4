"""The coordinator runtime asks each participant's bounds at begin and refuses a plan that assumes more time than
they offer (HATP-MODE-9), over in-memory participants on the fake clock."""

from __future__ import annotations

import anyio
import pytest

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.estimate import OperationBounds
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import BoundsAsker, CoordinatorRuntime
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
        return bounds_of(plan, branch_id, max_lease)

    return ask


def bounds_of(plan: Plan, branch_id: str, max_lease: int | None) -> OperationBounds:
    b = plan.branch(branch_id)
    return OperationBounds(
        txn_id=plan.txn_id,
        branch_id=branch_id,
        operation=b.operation,
        tier=b.tier,
        max_lease_seconds=max_lease,
        max_duration_seconds=b.max_duration_seconds,
    )


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


def slow_pay(asked: list[tuple[str, str]], pay_seconds: int) -> BoundsAsker:
    """Bounds as the plan assumes, except the payment participant states its calls take up to `pay_seconds`."""
    base = asker(900, asked)

    async def ask(participant: str, plan: Plan, branch_id: str) -> OperationBounds:
        got = await base(participant, plan, branch_id)
        return got.model_copy(update={"max_duration_seconds": pay_seconds}) if branch_id == "pay" else got

    return ask


def slow_approver(world: World, worst_seconds: int) -> None:
    """The gateway's signed worst case for the finance approval is `worst_seconds` (it answers at once anyway)."""
    real = world.approver.estimate

    async def estimate(plan: Plan, requirement_id: str) -> object:
        got = await real(plan, requirement_id)
        return got.model_copy(update={"worst_seconds": worst_seconds})

    world.approver.estimate = estimate  # type: ignore[method-assign,assignment]


@pytest.mark.anyio
async def test_HATP_MODE_9_auto_chooses_again_with_the_participants_durations_and_commits(clock: FakeClock) -> None:
    # The approver may take 10,000 s of the 14,400 s hold horizon: with the plan's 10 s payment call parallel fits;
    # with the 5,000 s the payment participant states, only approval-first does (holds placed after the yes).
    world = build_world(clock)
    slow_approver(world, 10_000)
    plan = trip_plan(clock.now())
    assert plan.mode == "auto"
    coord = with_bounds(world, slow_pay([], 5_000))
    result = await drive(clock, lambda: coord.run(plan))
    begin = result.record["events"][0]["body"]
    assert (begin["mode"], begin["requested"]) == ("approval-first", "auto")
    assert begin["timing"]["commit"] >= 5_000 and "parallel" not in begin["timing"]["fits"]
    assert result.outcome is Outcome.COMMITTED


@pytest.mark.anyio
async def test_HATP_MODE_9_an_explicit_mode_the_participants_durations_rule_out_is_refused(clock: FakeClock) -> None:
    world = build_world(clock)
    slow_approver(world, 10_000)
    doc = trip_plan(clock.now()).wire()
    doc["mode"] = "parallel"
    with anyio.fail_after(10), pytest.raises(HatpError) as err:
        await with_bounds(world, slow_pay([], 5_000)).run(Plan.model_validate(doc))
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MODE-9", "MODE_DOES_NOT_FIT", "$.mode")
    assert "approval-first" in err.value.fix
    assert await world.log.unfinished() == [] and world.seat.effects == []


class _Holding:
    """A BoundsAsker that already holds the bounds of the branches in `held` (`known`: no call), fails to look up
    those in `broken`, and asks the rest (recorded in `asked`)."""

    def __init__(self, max_lease: int, asked: list[tuple[str, str]], held: set[str], broken: set[str]) -> None:
        self._ask = asker(max_lease, asked)
        self._max_lease = max_lease
        self._held = held
        self._broken = broken

    async def __call__(self, participant: str, plan: Plan, branch_id: str) -> OperationBounds:
        return await self._ask(participant, plan, branch_id)

    def known(self, participant: str, plan: Plan, branch_id: str) -> OperationBounds | None:
        if branch_id in self._broken:
            raise KeyError(branch_id)
        return bounds_of(plan, branch_id, self._max_lease) if branch_id in self._held else None


@pytest.mark.anyio
async def test_HATP_MODE_9_bounds_the_asker_holds_need_no_call_and_the_rest_are_asked(clock: FakeClock) -> None:
    world = build_world(clock)
    asked: list[tuple[str, str]] = []
    ask = _Holding(900, asked, held={"seat", "room"}, broken={"event"})
    result = await drive(clock, lambda: with_bounds(world, ask).run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    assert sorted(b for _p, b in asked) == ["event", "pay"]  # a failed lookup is asked like any other branch


@pytest.mark.anyio
async def test_HATP_MODE_9_held_bounds_are_checked_like_asked_ones(clock: FakeClock) -> None:
    world = build_world(clock)
    asked: list[tuple[str, str]] = []
    ask = _Holding(600, asked, held={"seat", "room", "event", "pay"}, broken=set())
    with anyio.fail_after(10), pytest.raises(HatpError) as err:
        await with_bounds(world, ask).run(trip_plan(clock.now()))
    assert (err.value.rule, err.value.code) == ("HATP-MODE-9", "BOUNDS_EXCEEDED")
    assert asked == [] and world.seat.effects == []  # nobody called, nothing sent

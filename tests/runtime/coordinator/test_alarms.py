"""A transaction's timers: each armed time is reported once it has come, earliest first, on the system clock
(one loop timer, no task) and on the fake clock (one sleeping task)."""

from __future__ import annotations

from datetime import timedelta

import anyio
import pytest

from hatp_mcp.core.txn.events import Event, Timer
from hatp_mcp.runtime.clock import FakeClock, SystemClock
from hatp_mcp.runtime.coordinator.alarms import LoopAlarms, TaskAlarms, alarms_for
from hatp_mcp.runtime.coordinator.calls import Children
from tests.txn_helpers import settle


def _keys(events: list[Event]) -> list[str]:
    return [e.key for e in events if isinstance(e, Timer)]


@pytest.mark.anyio
async def test_system_clock_alarms_fire_earliest_first_and_an_earlier_arm_reschedules() -> None:
    clock = SystemClock()
    kids: Children[Event] = Children()
    alarms = alarms_for(clock, kids)
    assert isinstance(alarms, LoopAlarms) and kids.running == 0  # a loop timer, no task
    now = clock.now()
    alarms.arm("late", now + timedelta(milliseconds=40))
    alarms.arm("early", now + timedelta(milliseconds=10))  # earlier than the armed target: rescheduled
    alarms.arm("past", now - timedelta(seconds=1))  # already due
    got: list[Event] = []
    with anyio.fail_after(5):
        while len(got) < 3:
            got.append(await kids.next())
    assert _keys(got) == ["past", "early", "late"]
    assert all(isinstance(e, Timer) and clock.now() >= e.at for e in got)
    alarms.close()


@pytest.mark.anyio
async def test_closed_system_clock_alarms_report_nothing() -> None:
    clock = SystemClock()
    kids: Children[Event] = Children()
    alarms = alarms_for(clock, kids)
    alarms.arm("never", clock.now() + timedelta(milliseconds=5))
    alarms.close()
    with anyio.move_on_after(0.05):
        await kids.next()
        pytest.fail("a closed alarm reported a timer")


@pytest.mark.anyio
async def test_fake_clock_alarms_fire_when_the_clock_passes_them(clock: FakeClock) -> None:
    kids: Children[Event] = Children()
    alarms = alarms_for(clock, kids)
    assert isinstance(alarms, TaskAlarms) and kids.running == 1
    alarms.arm("b", clock.now() + timedelta(seconds=20))
    alarms.arm("a", clock.now() + timedelta(seconds=10))
    await settle()
    assert kids.ready() == []
    clock.advance(15)
    await settle()
    assert _keys(kids.ready()) == ["a"]
    clock.advance(10)
    await settle()
    assert _keys(kids.ready()) == ["b"]
    await kids.aclose()


@pytest.mark.anyio
async def test_a_fake_clock_names_its_earliest_sleeper_deadline_and_none_when_nobody_waits() -> None:
    clock = FakeClock()
    assert clock.next_deadline() is None
    late, early = clock.now() + timedelta(seconds=30), clock.now() + timedelta(seconds=5)
    async with anyio.create_task_group() as tg:
        tg.start_soon(clock.sleep_until, late)
        tg.start_soon(clock.sleep_until, early)
        with anyio.fail_after(5):
            while clock.sleepers < 2:
                await anyio.lowlevel.checkpoint()
        assert clock.next_deadline() == early
        clock.set(late)
    assert clock.next_deadline() is None

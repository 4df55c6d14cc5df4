"""A transaction's timers: absolute times armed by the coordinator machine, reported back as Timer events.

Two ways to wake, one behaviour: every armed entry is reported once its time has come (by the Clock's `now()`),
earliest first. Re-armed keys leave stale entries behind; the machine ignores those.
- `LoopAlarms` (the system clock): one asyncio loop timer for the earliest entry, no task. The loop's clock is
  monotonic and `now()` is wall time, so a timer that fires a hair early finds nothing due and simply re-arms.
- `TaskAlarms` (any other Clock, e.g. FakeClock): one task sleeps on the Clock until the earliest entry; arming an
  earlier time wakes it.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Callable
from datetime import datetime

import anyio

from hatp_mcp.core.txn.events import Event, Timer
from hatp_mcp.runtime.clock import Clock, SystemClock
from hatp_mcp.runtime.coordinator.calls import Children

__all__ = ["Alarms", "LoopAlarms", "TaskAlarms", "alarms_for"]


class _Heap:
    def __init__(self, clock: Clock, post: Callable[[Event], None]) -> None:
        self._clock = clock
        self._post = post
        self._heap: list[tuple[datetime, int, str]] = []
        self._count = 0
        self._target: datetime | None = None  # the time the wake-up is set for (None: none is)

    def _push(self, key: str, at: datetime) -> None:
        heapq.heappush(self._heap, (at, self._count, key))
        self._count += 1

    def _report_due(self) -> None:
        now = self._clock.now()
        while self._heap and now >= self._heap[0][0]:
            at, _n, key = heapq.heappop(self._heap)
            self._post(Timer(key=key, at=at))

    @property
    def _earliest(self) -> datetime | None:
        return self._heap[0][0] if self._heap else None


class LoopAlarms(_Heap):
    def __init__(self, clock: Clock, post: Callable[[Event], None]) -> None:
        super().__init__(clock, post)
        self._handle: asyncio.TimerHandle | None = None

    def arm(self, key: str, at: datetime) -> None:
        self._push(key, at)
        if self._target is None or at < self._target:
            self._schedule()

    def _schedule(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._target = self._earliest
        if self._target is not None:
            delay = max(0.0, (self._target - self._clock.now()).total_seconds())
            self._handle = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._report_due()
        self._schedule()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


class TaskAlarms(_Heap):
    def __init__(self, clock: Clock, post: Callable[[Event], None]) -> None:
        super().__init__(clock, post)
        self._scope: anyio.CancelScope | None = None

    def arm(self, key: str, at: datetime) -> None:
        self._push(key, at)
        if self._scope is not None and (self._target is None or at < self._target):
            self._scope.cancel()

    async def run(self) -> None:
        while True:
            self._report_due()
            self._target = self._earliest
            self._scope = anyio.CancelScope()
            with self._scope:
                if self._target is None:
                    await anyio.sleep_forever()
                else:
                    await self._clock.sleep_until(self._target)
            self._scope = None

    def close(self) -> None:
        return None  # the task is one of the transaction's children: closing them cancels it


Alarms = LoopAlarms | TaskAlarms


def alarms_for(clock: Clock, children: Children[Event]) -> Alarms:
    """The alarms for one transaction; the task kind is started as one of `children`."""
    if isinstance(clock, SystemClock):
        return LoopAlarms(clock, children.post)
    alarms = TaskAlarms(clock, children.post)
    children.spawn(alarms.run())
    return alarms

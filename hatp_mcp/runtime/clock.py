"""The swappable clock. Deadlines are absolute UTC datetimes; relative waits are thin wrappers.

`SystemClock` reads the real time; `FakeClock` (tests, demos) moves only when told to, and wakes every sleeper
whose deadline it passes, so timeout tests never wait for real.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol

import anyio

__all__ = ["Clock", "FakeClock", "SystemClock"]


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, aware, UTC."""
        ...

    async def sleep_until(self, deadline: datetime) -> None:
        """Return once now() >= deadline. Cancellable."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, deadline: datetime) -> None:
        delay = (deadline - self.now()).total_seconds()
        if delay > 0:
            await anyio.sleep(delay)


class FakeClock:
    """A clock that stands still until `advance()` or `set()` moves it."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
        self._sleepers: list[tuple[datetime, anyio.Event]] = []

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, deadline: datetime) -> None:
        if self._now >= deadline:
            await anyio.lowlevel.checkpoint()
            return
        event = anyio.Event()
        entry = (deadline, event)
        self._sleepers.append(entry)
        try:
            await event.wait()
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def set(self, when: datetime) -> None:
        if when < self._now:
            raise ValueError("a fake clock never goes backwards")
        self._now = when
        for deadline, event in list(self._sleepers):
            if deadline <= when:
                self._sleepers.remove((deadline, event))
                event.set()

    def advance(self, seconds: float) -> None:
        self.set(self._now + timedelta(seconds=seconds))

    def next_deadline(self) -> datetime | None:
        """The earliest time a waiter is sleeping until, or None (a driver that jumps time forward uses it)."""
        return min((d for d, _ in self._sleepers), default=None)

    @property
    def sleepers(self) -> int:
        """How many tasks are waiting on this clock (tests use it to know a waiter is armed)."""
        return len(self._sleepers)

"""When a child that died is started again: exponential backoff, and a bound on restarts within a window.

Pure: it takes the times of the child's earlier deaths and `now`, and says how long to wait, or that the child has
failed too often and is left down (HATP-MCP-43). A child that crashes at once on every start would otherwise eat the
machine in a loop; one that dies now and then (a crash a day) is restarted every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["RestartPolicy"]


@dataclass(frozen=True)
class RestartPolicy:
    """`max_restarts` deaths within `window_seconds` and the child is left down; otherwise the wait before the next
    start doubles from `first_delay` with each recent death, up to `max_delay`."""

    first_delay: float = 0.5
    max_delay: float = 30.0
    max_restarts: int = 5
    window_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.first_delay <= 0 or self.max_delay < self.first_delay or self.max_restarts < 1:
            raise ValueError("a restart policy waits a positive time, at most max_delay, for at least one restart")

    def delay(self, deaths: Sequence[datetime], now: datetime) -> float | None:
        """Seconds to wait before starting again after the last of `deaths` (oldest first), or None: it died
        `max_restarts` times within the window and stays down."""
        recent = [d for d in deaths if now - d <= timedelta(seconds=self.window_seconds)]
        if len(recent) > self.max_restarts:  # HATP-MCP-43: died too often, left down
            return None
        return float(min(self.max_delay, self.first_delay * 2.0 ** max(0, len(recent) - 1)))

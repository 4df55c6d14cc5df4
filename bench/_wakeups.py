"""Event-loop wakeups counted in this process (asyncio): loop iterations and the callbacks they run.

An iteration is one pass of the loop (a select, then every callback that was ready); a callback (a Handle run)
is a task step, a future's done callback, an I/O event, a timer, or a call_soon_threadsafe from another thread.
Both are counted while `counting()` is entered, by wrapping asyncio's own methods (opt-in, for benches only: the
wrappers add a little to each callback, and they are removed on leaving).
"""

from __future__ import annotations

import asyncio.base_events
import asyncio.events
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Wakeups"]


class Wakeups:
    def __init__(self) -> None:
        self.iterations = 0
        self.callbacks = 0

    def read(self) -> tuple[int, int]:
        return self.iterations, self.callbacks

    @contextmanager
    def counting(self) -> Iterator[Wakeups]:
        loop_cls: Any = asyncio.base_events.BaseEventLoop
        handle_cls: Any = asyncio.events.Handle
        run_once, run = loop_cls._run_once, handle_cls._run

        def counted_run_once(loop: Any) -> None:
            self.iterations += 1
            run_once(loop)

        def counted_run(handle: Any) -> None:
            self.callbacks += 1
            run(handle)

        loop_cls._run_once, handle_cls._run = counted_run_once, counted_run
        try:
            yield self
        finally:
            loop_cls._run_once, handle_cls._run = run_once, run

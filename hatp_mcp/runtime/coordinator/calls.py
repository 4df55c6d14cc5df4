"""A transaction's concurrent calls and the one inbox their answers arrive in (the coordinator driver's plumbing).

Each participant and approver call (and, on a clock other than the system's, the alarm: runtime/coordinator/alarms.py)
runs as a plain asyncio task; answers are posted to an asyncio.Queue that the drive loop reads. An anyio task group and
memory stream would do the same job, but a spawn there costs more than an asyncio task's and a trip starts about
ten; so the coordinator runtime runs on asyncio, the backend the MCP SDK's servers and every process in this
project use.

The guarantees the task group gave are kept:
- a child that fails (an exception other than cancellation) stops the drive loop with that exception;
- when the loop ends, for any reason, every child still running is cancelled, and awaited (shielded, so a
  cancelled caller still leaves no task behind); a failure nobody has raised yet is raised then;
- a second failure is never dropped: it is noted on the first (`add_note`).
Children convert the failures they expect into events themselves; what reaches here is a bug, and never silent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

import anyio

from hatp_mcp.errors import BrokenInvariant

__all__ = ["Children"]

E = TypeVar("E")


class Children(Generic[E]):
    def __init__(self) -> None:
        self._inbox: asyncio.Queue[E | None] = asyncio.Queue()  # None: a child failed (see _done)
        self._tasks: set[asyncio.Task[None]] = set()
        self._failure: BaseException | None = None
        self._raised = False

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if self._failure is None:
            self._failure = exc
            self._inbox.put_nowait(None)  # wakes the loop, which raises it
        else:
            self._failure.add_note(f"another child failed too: {exc!r}")

    def post(self, event: E) -> None:
        """A child's answer for the drive loop (never blocks: the inbox is unbounded, like the stream it replaced)."""
        self._inbox.put_nowait(event)

    def _check(self, item: E | None) -> E:
        if item is None:
            if self._failure is None:
                raise BrokenInvariant("the inbox was woken with no failure to raise (only `fail` posts None)")
            self._raised = True
            raise self._failure
        return item

    async def next(self) -> E:
        """The next answer; raises a child's failure."""
        return self._check(await self._inbox.get())

    def ready(self) -> list[E]:
        """Every answer already waiting (without blocking); raises a child's failure."""
        out: list[E] = []
        while not self._inbox.empty():
            out.append(self._check(self._inbox.get_nowait()))
        return out

    @property
    def waiting(self) -> bool:
        """An answer (or a failure) is waiting in the inbox."""
        return not self._inbox.empty()

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def aclose(self) -> None:
        """Cancel every child still running and wait until each has finished."""
        for task in list(self._tasks):
            task.cancel()
        with anyio.CancelScope(shield=True):
            while self._tasks:
                await asyncio.wait(set(self._tasks))
        if self._failure is not None and not self._raised:  # e.g. a child that failed while being cancelled
            self._raised = True
            raise self._failure

"""Threads of one's own for blocking work awaited from the event loop: `await WorkerThreads(2, "name").run(fn, *a)`.

A fixed number of long-lived threads take jobs from one C-level SimpleQueue; each job hands its result (or what it
raised) back with one `call_soon_threadsafe` that settles the awaiting coroutine's future. `run_in_executor` does
the same hop through a concurrent Future chained to an asyncio one (its Condition, its done-callbacks, the
executor's idle semaphore and thread-count check on every submit), which is the work this hop leaves out.

The threads start at the first job and end when their WorkerThreads is garbage (each takes a stop from the queue,
after the jobs before it); they are daemon threads: a job that is running when the interpreter exits does not hold
the exit up (a SQLite commit it was making is atomic: the awaiting coroutine never saw it return). A caller
cancelled while its job runs stops waiting; the job still runs to its end. Nothing here decides anything.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

__all__ = ["WorkerThreads"]

R = TypeVar("R")

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


class WorkerThreads:
    """`count` threads named `name`-N running the jobs `run` gives them, in the order given, each on whichever
    thread is free."""

    def __init__(self, count: int, name: str) -> None:
        if count < 1:
            raise ValueError("a WorkerThreads needs at least one thread")
        self._count = count
        self._name = name
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._start = threading.Lock()
        weakref.finalize(self, _stop, self._jobs, count)  # the threads hold the queue, never this object

    @property
    def started(self) -> int:
        """How many of the threads are running (none before the first job)."""
        return len(self._threads)

    async def run(self, fn: Callable[..., R], *args: Any) -> R:
        """Run `fn(*args)` on one of the threads and return what it returns (or raise what it raised)."""
        if not self._threads:
            self._start_threads()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[R] = loop.create_future()
        self._jobs.put((loop, waiter, fn, args))
        return await waiter

    def _start_threads(self) -> None:
        with self._start:
            if self._threads:
                return
            for n in range(self._count):
                thread = threading.Thread(target=_serve, args=(self._jobs,), name=f"{self._name}-{n}", daemon=True)
                thread.start()
                self._threads.append(thread)


def _serve(jobs: SimpleQueue[_Job | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:  # its WorkerThreads is gone
            return
        _run(*job)
        del job  # hold nothing of a finished job while waiting for the next


def _run(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[Any], fn: Callable[..., Any], args: Any) -> None:
    try:
        result = fn(*args)
    except BaseException as exc:  # handed to the awaiting coroutine, whatever it is
        _hand_back(loop, waiter, None, exc)
    else:
        _hand_back(loop, waiter, result, None)


def _stop(jobs: SimpleQueue[_Job | None], count: int) -> None:
    for _ in range(count):
        jobs.put(None)


def _hand_back(
    loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[Any], result: Any, error: BaseException | None
) -> None:
    try:
        loop.call_soon_threadsafe(_settle, waiter, result, error)
    except RuntimeError:  # the loop closed: nobody is waiting any more
        pass


def _settle(waiter: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if waiter.done():  # its caller was cancelled and stopped waiting
        return
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(result)

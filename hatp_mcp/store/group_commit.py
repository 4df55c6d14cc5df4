"""Group commit, the one queue in front of every durable store's writes (the coordinator's log, the journal).

Submissions that arrive while a write is in flight are written together by the next `write(batch)`, one
database transaction and one durable commit for all of them, in the order they were submitted. The first waiter
leads: it writes batches until the queue is empty. Each submission is settled once its batch is durable, or
with what the write raised (nothing of a failed batch is kept: `write` is one database transaction). `write`
may refuse one submission of the batch alone by setting its `error` (and writing none of it): HATP-STORE-5.
This module orders and settles writes; it decides nothing and writes nothing itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

import anyio

from hatp_mcp.store.errors import LogInterrupted

__all__ = ["GroupCommit", "Queued"]


class Queued(Protocol):
    """What a group commit needs of a submission: an event set once it is settled, and the error it failed with."""

    done: anyio.Event
    error: BaseException | None


P = TypeVar("P", bound=Queued)


class GroupCommit(Generic[P]):
    """The queue of submissions `P` in front of `write`. `admit(batch)` (optional) returns the part of a batch to
    write, having settled the rest itself; `failed(settled)` (optional) hears of the submissions a failed or
    interrupted write settled with an error; `on_durable(n)` runs after the n-th durable batch (crash tests stop
    the process there)."""

    grouped = True
    """False (set on the class, by bench.mechanisms only) writes one submission per write, to measure the gain."""

    def __init__(
        self,
        write: Callable[[list[P]], Awaitable[None]],
        *,
        admit: Callable[[list[P]], list[P]] | None = None,
        failed: Callable[[Sequence[P]], None] | None = None,
        on_durable: Callable[[int], None] | None = None,
    ) -> None:
        self._write = write
        self._admit = admit
        self._failed = failed
        self._on_durable = on_durable
        self.queue: list[P] = []
        self.writing = False
        self.submitted = 0  # submissions queued
        self.batches = 0  # durable batches written

    def submit(self, mine: P) -> Awaitable[None]:
        """Queue `mine` now (the order of submit calls is the order of the writes); the awaitable returns once its
        batch is durable, or raises what settled it."""
        self.queue.append(mine)
        self.submitted += 1
        return self._wait(mine)

    def _take(self) -> list[P]:
        if self.grouped:
            batch, self.queue = self.queue, []
        else:
            batch, self.queue = self.queue[:1], self.queue[1:]
        return batch

    async def _wait(self, mine: P) -> None:
        if not self.writing:
            # The first waiter leads. Shielded: a batch being written is written (or fails) whole, even if the
            # caller is cancelled.
            self.writing = True
            try:
                with anyio.CancelScope(shield=True):
                    while self.queue:
                        await self._write_one_batch()
            finally:
                self.writing = False
        if not mine.done.is_set():  # the leader's own batch is settled already: no wait (and no extra wakeup)
            await mine.done.wait()
        if mine.error is not None:
            raise mine.error

    async def _write_one_batch(self) -> None:
        batch = self._take()
        if self._admit is not None:
            batch = self._admit(batch)
            if not batch:  # every submission of it was refused: nothing to write
                return
        error: BaseException | None = None
        try:
            await self._write(batch)
        except Exception as exc:  # handed to every waiter of the batch
            error = exc
        except BaseException:
            # The leader's task itself was cancelled (asyncio's own cancel passes an anyio shield): settle its
            # batch and those queued behind it as failed, or they wait forever; none is told it is durable.
            settled = [*batch, *self.queue]
            self.queue = []
            self._settle(settled, LogInterrupted("the writer was cancelled while this batch was written"))
            raise
        if error is not None:
            self._settle(batch, error)
            return
        for p in batch:  # an error `write` set refuses that submission alone
            p.done.set()
        self.batches += 1
        if self._on_durable is not None:
            self._on_durable(self.batches)

    def _settle(self, settled: Sequence[P], error: BaseException) -> None:
        for p in settled:
            p.error = error
        if self._failed is not None:
            self._failed(settled)
        for p in settled:
            p.done.set()

"""The failures every store backend shares: the database cannot be reached (an OSError, so a server's start-up
handles it with its other IO failures), and an append whose group commit was interrupted. A refusal of the store's
contents or settings is a HatpError instead (HATP-STORE-1, HATP-STORE-3)."""

from __future__ import annotations

__all__ = ["LogInterrupted", "StoreUnreachable"]


class StoreUnreachable(OSError):
    """The store's database did not answer (not started, wrong address, refused credentials, timed out)."""


class LogInterrupted(RuntimeError):
    """The task writing an append's batch (a group commit's leader) was cancelled by asyncio itself (task.cancel(),
    which the write's anyio shield does not stop) before the batch settled: whether the append is durable is not
    known, so it is not answered as durable (the caller treats it as a failed write; recovery reads what was kept)."""

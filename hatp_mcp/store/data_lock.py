"""One process at a time on a --data folder: an exclusive lock on `DIR/NAME.lock`, released by the kernel when the
process ends, however it ends (a SIGKILL included), so a stale lock never blocks a restart."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DataLocked", "data_lock"]


class DataLocked(Exception):
    """Another process holds the folder's lock."""


@contextmanager
def data_lock(data: Path, name: str) -> Iterator[None]:
    """Hold `data/name.lock` for the block. Raises DataLocked at once (never waits) when another process holds it,
    OSError when the file cannot be opened."""
    data.mkdir(parents=True, exist_ok=True)
    fd = os.open(data / f"{name}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataLocked(f"{data / (name + '.lock')} is held by another process") from None
        yield
    finally:
        os.close(fd)

"""One process at a time on a folder: an exclusive lock on a file in it, the one way every server here keeps a second
process off what the first one owns (the service on its organisation's store, HATP-MCP-42; a proxy on its --data,
HATP-PXY-13).

The lock is the kernel's (`flock`), held on an open descriptor for the holder's life: it is released when the
process ends however it ends (a SIGKILL too), so a file left behind never keeps the next one out. The file says
who holds it (pid, since when), for the message of the one that cannot start.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["DataLock", "DataLocked", "data_lock", "held_by"]


class DataLocked(RuntimeError):
    """Another process holds the lock; `holder` is what it wrote (pid, since), possibly empty."""

    def __init__(self, path: Path, holder: dict[str, Any]) -> None:
        who = f"pid {holder.get('pid', '?')} since {holder.get('since', '?')}" if holder else "another process"
        super().__init__(f"{path} is held by {who}")
        self.path = path
        self.holder = holder


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


class DataLock:
    """`acquire()` takes the lock at `path` or raises DataLocked at once (it never waits); `release()`, or the
    process's end, lets it go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, since: str | None = None) -> None:
        """Raises DataLocked (held by another process) or OSError. `since` is written beside the pid."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataLocked(self.path, _read(self.path)) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "since": since} if since else {"pid": os.getpid()}).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


@contextmanager
def data_lock(data: Path, name: str) -> Iterator[None]:
    """Hold `data/name.lock` for the block. Raises DataLocked, OSError (as DataLock.acquire)."""
    lock = DataLock(data / f"{name}.lock")
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def held_by(path: Path) -> dict[str, Any] | None:
    """Who holds the lock at `path` now (what it wrote), or None when nobody does. Takes it for an instant."""
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

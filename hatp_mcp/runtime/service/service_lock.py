"""One service per organisation store: an exclusive lock on a file in its data directory (HATP-MCP-42).

The lock is the kernel's (`flock`), held on an open descriptor for the service's life: it is released when the
process ends however it ends (a SIGKILL too), so a stale file never keeps a new service out. The file says who
holds it (pid, since when), for the message of the one that cannot start.
"""

from __future__ import annotations

import fcntl
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["ServiceBusy", "ServiceLock", "held_by"]


class ServiceBusy(RuntimeError):
    """Another service holds the lock; `holder` is what it wrote (pid, since), possibly empty."""

    def __init__(self, path: Path, holder: dict[str, Any]) -> None:
        who = f"pid {holder.get('pid', '?')} since {holder.get('since', '?')}" if holder else "another process"
        super().__init__(f"{path} is held by {who}: a service of this organisation is already running")
        self.path = path
        self.holder = holder


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


class ServiceLock:
    """`acquire()` takes the lock or raises ServiceBusy; `release()` (or the process's end) lets it go."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, now: datetime) -> None:
        """Raises ServiceBusy (held by another process) or OSError."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ServiceBusy(self.path, _read(self.path)) from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "since": now.isoformat()}).encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def held_by(path: Path) -> dict[str, Any] | None:
    """Who holds the lock at `path` now (what it wrote), or None when nobody does. Takes it for an instant."""
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)

"""Reading a file that holds a secret (a key, a token, a password): one open, the mode taken from the opened file,
so the file read is the file checked. Imports nothing but the standard library: a bridge reads its token with it
before anything heavy is loaded."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["OWNER_ONLY", "read_private"]


def OWNER_ONLY(mode: int) -> bool:
    """A regular file only its owner may read or write (0600 or stricter, no execute bit)."""
    return stat.S_ISREG(mode) and not mode & 0o177


def read_private(path: Path, allowed: Callable[[int], bool] = OWNER_ONLY) -> tuple[int, bytes | None]:
    """The mode of the file at `path` and its bytes, or None for the bytes when `allowed(mode)` is false (the caller
    refuses, naming the mode). The mode is the opened file's (fstat), so the file read is the file checked: one
    swapped in after a check of the path cannot pass. Raises OSError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        return mode, f.read() if allowed(mode) else None

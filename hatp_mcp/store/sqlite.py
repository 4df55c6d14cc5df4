"""Opening SQLite the one way HATP needs it: WAL, synchronous=FULL (a decision survives power loss).

Every store module opens its database through `open_db`, so durability settings live in one place.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["open_db"]


def open_db(path: str | Path, *, check_same_thread: bool = False) -> sqlite3.Connection:
    """Open (creating) a database at `path` (":memory:" allowed) with durable settings.

    The connection is in autocommit mode (isolation_level=None): callers group writes with explicit
    ``BEGIN IMMEDIATE`` ... ``COMMIT`` so one fsync covers a batch.
    """
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=check_same_thread, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn

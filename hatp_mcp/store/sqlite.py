"""Opening SQLite the one way HATP needs it: WAL, synchronous=FULL (a decision survives power loss).

Every store module opens its database through `open_db`, so durability settings live in one place.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from hatp_mcp.errors import HatpError
from hatp_mcp.store.schema import Schema, migrate_sqlite

__all__ = ["immediate", "json_text", "open_db", "open_versioned", "require_forced"]


def json_text(obj: Any) -> str:
    """JSON text for a row, read back exactly by json.loads.

    orjson (faster than json.dumps for rows that hold signed objects) except for an integer beyond
    64 bits, which it refuses: then the exact, slower encoder. Callers store only objects that were canonicalized
    (signed or digested) or built from such, which refuses NaN and infinities, the one thing orjson would change
    (it writes them as null).
    """
    try:
        return orjson.dumps(obj).decode()
    except TypeError:
        return json.dumps(obj)


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


def require_forced(conn: sqlite3.Connection, rule: str, store: str) -> None:
    """Refuse a connection whose commits are not fsynced (synchronous below FULL) for a store whose every write
    must be forced (`rule` says why). Raises HatpError `rule` (STORE_NOT_DURABLE)."""
    level = int(conn.execute("PRAGMA synchronous").fetchone()[0])
    if level < 2:
        raise HatpError(
            rule,
            f"the {store} is open with synchronous={level}: its writes would return before they are on disk, and "
            "each of them must be forced",
            path="PRAGMA synchronous",
            code="STORE_NOT_DURABLE",
            fix="open the store with synchronous=FULL, its default",
        )


@contextmanager
def immediate(conn: sqlite3.Connection, lock: threading.Lock) -> Iterator[None]:
    """One write transaction on a connection shared by threads: the lock held, BEGIN IMMEDIATE (so another process
    waits rather than reads stale rows), COMMIT when the block ends, ROLLBACK when anything (cancellation too)
    leaves it."""
    with lock:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


def open_versioned(
    path: str | Path, schema: Schema, lock: threading.Lock, default_name: str
) -> tuple[Path, sqlite3.Connection]:
    """A store's database: `path`, or `path/default_name` when `path` is a folder, opened (open_db) and its schema
    created or migrated under `lock` (HATP-STORE-1: a newer schema than this code's raises HatpError)."""
    p = Path(path)
    if p.is_dir():
        p = p / default_name
    conn = open_db(p)
    with lock:
        migrate_sqlite(conn, schema, str(p))
    return p, conn

"""The durable state of a tool server's approval gate: the nonces of approvals already used (each
approval works once, across restarts, HATP-GATE-18) and when each tool definition took effect (HATP-GATE-9).

Spending a nonce is one atomic INSERT committed with synchronous=FULL before the tool runs, so two concurrent
calls with the same approval cannot both run and a crash after the insert never lets it run twice. This module
decides nothing: the rules are hatp_mcp/core/gated_tools/checks.py's; it must not import the MCP SDK. `ReplayCache` is
the interface, `SqliteReplayCache` the embedded default, hatp_mcp.store.postgresql.replay_cache the shared one.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import open_db, require_forced

__all__ = ["SQLITE_SCHEMA", "WAL_PAGES", "ReplayCache", "SqliteReplayCache"]

_SQLITE_V1 = """
CREATE TABLE IF NOT EXISTS used_nonce (
    server TEXT NOT NULL,
    nonce TEXT NOT NULL,
    approval_id TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT NOT NULL,
    PRIMARY KEY (server, nonce)
);
CREATE TABLE IF NOT EXISTS tool_definition (
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    digest TEXT NOT NULL,
    since TEXT NOT NULL,
    PRIMARY KEY (server, tool, digest)
);
"""
SQLITE_SCHEMA = Schema("replay", (tuple(s.strip() for s in _SQLITE_V1.split(";") if s.strip()),))


class ReplayCache(Protocol):
    """Used approval nonces and tool definition epochs. Every write is durable before it returns."""

    def close(self) -> None: ...

    def seen(self, server: str, nonce: str) -> bool: ...

    def consume(self, server: str, nonce: str, *, approval_id: str, expires_at: str, now: datetime) -> bool:
        """Spend `nonce` durably and atomically: True for the one call that spent it, False for every replay."""
        ...

    def seen_any(self, server: str, keys: list[str]) -> bool: ...

    def consume_all(self, server: str, keys: list[str], *, approval_id: str, expires_at: str, now: datetime) -> bool:
        """Spend every one of `keys` durably, all or none: True when this call spent them all, False (nothing
        spent) when any was already spent."""
        ...

    def purge(self, now: datetime, *, margin: timedelta = ...) -> int: ...

    def note_definition(self, server: str, tool: str, digest: str, now: datetime) -> datetime:
        """Record `tool`'s current definition digest; return when the current definition took effect."""
        ...


# The write-ahead log's size in pages once a cache is open: SQLite's own checkpoint threshold (wal_autocheckpoint), so
# the log stays about this long from the first call on.
WAL_PAGES = 1000


def _presize_wal(db: sqlite3.Connection, path: str | Path) -> None:
    """Grow the write-ahead log to WAL_PAGES pages now, through SQLite itself, so that a spend never grows it.

    Every spend is one fdatasync of the log (synchronous=FULL). While the log is growing, that fdatasync must also make
    the file's new size durable, which costs a second device flush. After a complete checkpoint SQLite writes the log
    again from its start, and keeps its size, so a log grown once to the checkpoint threshold never grows again while
    the cache is open. The same durable point stays: the nonce is in the log, and the log fdatasync'd, before the call
    runs. Costs one write of WAL_PAGES pages at open (a scratch table filled and dropped, then checkpointed: its pages
    stay in the file as free pages, reused as the cache grows). Nothing for an in-memory cache."""
    if str(path) == ":memory:" or db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        return
    page = int(db.execute("PRAGMA page_size").fetchone()[0])
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size >= page * WAL_PAGES:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("CREATE TABLE IF NOT EXISTS wal_presize (b BLOB)")
        db.execute("INSERT INTO wal_presize VALUES (zeroblob(?))", (page * WAL_PAGES,))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute(
        "DROP TABLE IF EXISTS wal_presize"
    )  # its own transaction: a table dropped where it was filled writes nothing
    db.execute("PRAGMA wal_checkpoint(PASSIVE)")


class SqliteReplayCache:
    """Used approval nonces and tool definition epochs of one or more gated servers. Thread-safe; `close()` it."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db: sqlite3.Connection = open_db(path)
        require_forced(self._db, "HATP-GATE-27", "gate's nonce store")  # a spend is fsynced before the tool runs
        with self._lock:
            migrate_sqlite(self._db, SQLITE_SCHEMA, str(path))
            _presize_wal(self._db, path)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def seen(self, server: str, nonce: str) -> bool:
        """True when `nonce` was already spent on `server`."""
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM used_nonce WHERE server = ? AND nonce = ?", (server, nonce)
            ).fetchone()
        return row is not None

    def consume(self, server: str, nonce: str, *, approval_id: str, expires_at: str, now: datetime) -> bool:
        """Spend `nonce` durably. True when this call spent it; False when it was already spent (a replay)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                cur = self._db.execute(
                    "INSERT OR IGNORE INTO used_nonce (server, nonce, approval_id, expires_at, used_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (server, nonce, approval_id, expires_at, format_ts(now)),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return cur.rowcount == 1

    def seen_any(self, server: str, keys: list[str]) -> bool:
        """True when any of `keys` was already spent on `server`."""
        return any(self.seen(server, k) for k in keys)

    def consume_all(self, server: str, keys: list[str], *, approval_id: str, expires_at: str, now: datetime) -> bool:
        """Spend every one of `keys` durably, all or none: True when this call spent them all; False (nothing
        spent) when any was already spent (a replay: the same approval, or one of its people's proofs, again)."""
        unique = list(dict.fromkeys(keys))
        used_at = format_ts(now)
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                # One prepared statement stepped once a key, in C (OR IGNORE skips a key already spent, so fewer
                # rows change than there are keys): the same one durable commit, a third of the Python calls.
                cur = self._db.executemany(
                    "INSERT OR IGNORE INTO used_nonce (server, nonce, approval_id, expires_at, used_at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    [(server, key, approval_id, expires_at, used_at) for key in unique],
                )
                if cur.rowcount != len(unique):
                    self._db.execute("ROLLBACK")
                    return False
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return True

    def purge(self, now: datetime, *, margin: timedelta = timedelta(days=1)) -> int:
        """Forget nonces whose approval expired more than `margin` before `now` (an expired approval is refused
        by HATP-GATE-10 anyway). Returns how many were forgotten."""
        cutoff = now - margin
        with self._lock:
            rows = self._db.execute("SELECT server, nonce, expires_at FROM used_nonce").fetchall()
            gone = [(s, n) for s, n, e in rows if parse_ts(e) < cutoff]
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM used_nonce WHERE server = ? AND nonce = ?", gone)
            self._db.execute("COMMIT")
        return len(gone)

    def note_definition(self, server: str, tool: str, digest: str, now: datetime) -> datetime:
        """Record that `tool` now has definition `digest` and return when the current definition took effect.

        When the digest differs from the newest one recorded, the definition changed: it takes effect at `now`
        (even if the same digest was seen long ago, so flipping a tool away and back does not revive approvals
        issued before the flip).
        """
        newest = "SELECT digest, since FROM tool_definition WHERE server = ? AND tool = ? ORDER BY rowid DESC LIMIT 1"
        with self._lock:
            # Every gated call asks, and the answer is nearly always "unchanged": a plain read (WAL: it waits for
            # no writer, takes no write lock, commits nothing). Only a change takes the write lock, and reads again
            # under it, so two processes noting the same change record one epoch.
            row = self._db.execute(newest, (server, tool)).fetchone()
            if row is not None and row[0] == digest:
                return parse_ts(row[1])
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(newest, (server, tool)).fetchone()
                if row is not None and row[0] == digest:
                    self._db.execute("COMMIT")
                    return parse_ts(row[1])
                self._db.execute(
                    "INSERT OR REPLACE INTO tool_definition (server, tool, digest, since) VALUES (?, ?, ?, ?)",
                    (server, tool, digest, format_ts(now)),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return parse_ts(format_ts(now))

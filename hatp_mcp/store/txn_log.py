"""The coordinator's durable log: each transaction's plan, its record events and its decisions.

`TxnLog` is the small interface a PostgreSQL store can also serve. `SqliteTxnLog` (the embedded default, opened
with hatp_mcp.store.sqlite.open_db: WAL, synchronous=FULL) group-commits: appends from concurrent transactions
that arrive while a write is in flight are written together in the next transaction, one fsync for all of them.
A forced append returns only once it is durable; an unforced one (`forced=False`, spec/store.md HATP-STORE-8)
once it is written to the operating system, fsynced by the next forced write; a forced append of no entries makes
every append before it durable. This module stores what the coordinator decided, forced or not; it decides
nothing.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import anyio.to_thread

from hatp_mcp.errors import HatpError
from hatp_mcp.store.group_commit import GroupCommit
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import json_text, open_db

__all__ = [
    "SQLITE_SCHEMA",
    "Lease",
    "LogEntry",
    "LoggedTxn",
    "MemoryTxnLog",
    "Pending",
    "SqliteTxnLog",
    "TxnLeases",
    "TxnLog",
    "not_owner",
]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One durable write: the plan (`kind="plan"`), a record event (`"event"`) or a decision (`"decision"`)."""

    kind: str
    payload: dict[str, Any]


@dataclass
class LoggedTxn:
    txn_id: str
    plan: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    decision: str | None = None  # the latest decision: commit | abort

    @property
    def closed(self) -> bool:
        return bool(self.events) and self.events[-1].get("event") == "record.closed"


class TxnLog(Protocol):
    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        """Write `entries` (in order) before returning: durably (fsynced) when `forced`; otherwise at least to the
        operating system, so they survive the coordinator's process (HATP-STORE-8). A forced append of no entries
        returns once every append before it is durable. A store may force every write."""
        ...

    async def load(self, txn_id: str) -> LoggedTxn | None: ...

    async def unfinished(self) -> list[str]:
        """Transactions whose record is not closed: a replacement coordinator finishes them."""
        ...


@dataclass(frozen=True, slots=True)
class Lease:
    """A transaction this coordinator owns, at `epoch` (spec/store.md HATP-STORE-4)."""

    txn_id: str
    epoch: int


@runtime_checkable
class TxnLeases(Protocol):
    """A log shared by several coordinators (PostgreSQL): each transaction is owned by one of them under a lease
    (owner id, epoch, expiry), HATP-STORE-4..6. A log without leases (SQLite, memory) has one owner, its process:
    it recovers every unfinished transaction at start and sends no epoch."""

    owner: str
    lease_seconds: float

    def epoch(self, txn_id: str) -> int | None:
        """The epoch this coordinator holds `txn_id` at; None when it holds no lease on it."""
        ...

    async def renew(self) -> list[str]:
        """Extend every lease held; returns the txnIds whose lease another coordinator took (they are dropped)."""
        ...

    async def take_lapsed(self, limit: int, exclude: Sequence[str] = ()) -> list[Lease]:
        """Take over up to `limit` unfinished transactions whose lease lapsed, each at its epoch + 1."""
        ...

    def release(self, txn_id: str) -> None:
        """Stop renewing `txn_id` (its record is closed, or its driver stopped)."""
        ...


def not_owner(txn_id: str, held: int | None, current: object, owner: object) -> HatpError:
    """HATP-STORE-5: an append from a coordinator that no longer owns the transaction at the current epoch."""
    mine = f"epoch {held}" if held is not None else "no lease"
    return HatpError(
        "HATP-STORE-5",
        f"transaction {txn_id!r} is owned by {owner!r} at epoch {current}; this coordinator holds {mine}: "
        "its append is refused, nothing of it is kept",
        path=f"txn_lease.{txn_id}",
        code="STALE_COORDINATOR",
        fix="a coordinator whose lease lapsed stops driving the transaction; its new owner finishes it",
    )


class MemoryTxnLog:
    """Not durable: for tests that do not crash."""

    def __init__(self) -> None:
        self._txns: dict[str, LoggedTxn] = {}

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        for e in entries:
            _apply(self._txns, txn_id, e)
        await anyio.lowlevel.checkpoint()

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return self._txns.get(txn_id)

    async def unfinished(self) -> list[str]:
        return [t for t, v in self._txns.items() if not v.closed]


def _apply(txns: dict[str, LoggedTxn], txn_id: str, e: LogEntry) -> None:
    if e.kind == "plan":
        txns.setdefault(txn_id, LoggedTxn(txn_id, e.payload))
    elif e.kind == "event":
        txns[txn_id].events.append(e.payload)
    elif e.kind == "decision":
        txns[txn_id].decision = str(e.payload["decision"])


@dataclass
class Pending:
    """One append waiting in a group commit."""

    txn_id: str
    entries: Sequence[LogEntry]
    epoch: int | None = None  # the lease epoch the appender held (HATP-STORE-5); None: a log without leases
    forced: bool = True  # fsynced before the append returns (HATP-STORE-8)
    done: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None


SQLITE_SCHEMA = Schema(
    "coordinator.log",
    (
        (
            "CREATE TABLE IF NOT EXISTS txn (txn_id TEXT PRIMARY KEY, plan TEXT NOT NULL, decision TEXT, closed INTEGER"
            " NOT NULL DEFAULT 0)",
            "CREATE TABLE IF NOT EXISTS txn_event (txn_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL,"
            " PRIMARY KEY (txn_id, seq))",
            "CREATE TABLE IF NOT EXISTS txn_decision (txn_id TEXT NOT NULL, n INTEGER NOT NULL, decision TEXT NOT NULL,"
            " reason TEXT, at TEXT, PRIMARY KEY (txn_id, n))",
        ),
    ),
)


class SqliteTxnLog:
    """SQLite decision log with group commit. `on_durable(batches_written)` runs after each durable batch."""

    def __init__(self, path: str | Path, *, on_durable: Callable[[int], None] | None = None) -> None:
        self._db = open_db(path)
        migrate_sqlite(self._db, SQLITE_SCHEMA, str(path))
        self._mutex = threading.Lock()
        self._group: GroupCommit[Pending] = GroupCommit(lambda batch: self._in_thread(self._write, batch))
        self._sync = "FULL"  # the connection's synchronous level now (open_db sets FULL)
        self._wal = None if str(path) == ":memory:" else Path(f"{path}-wal")  # where WAL mode writes its frames
        self._unsynced = False  # an unforced batch was committed since the last fsync
        self._on_durable = on_durable
        self.batches = 0  # how many durable transactions were written (group commit makes it < appends)
        self._threads = 0

    @property
    def idle(self) -> bool:
        """No write or read is in flight (tests on a fake clock wait for this before moving the clock)."""
        return not self._group.writing and not self._group.queue and self._threads == 0

    @property
    def appends(self) -> int:
        return self._group.submitted

    async def _in_thread(self, fn: Callable[..., R], *args: Any) -> R:
        """Run `fn` on a worker thread (anyio.to_thread; SQLite work is serialized by the mutex) and await its
        result. A caller cancelled while `fn` runs stops waiting; `fn` still runs to its end, and a write is
        awaited shielded (GroupCommit)."""
        self._threads += 1
        try:
            return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        finally:
            self._threads -= 1

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        """Raises whatever SQLite raised; nothing of the failed batch is kept."""
        await self._group.submit(Pending(txn_id, entries, forced=forced))

    def _write(self, batch: Sequence[Pending]) -> None:
        # HATP-STORE-8: a batch is fsynced (FULL) when any append in it is forced; else only written to the OS
        # (NORMAL: WAL frames without fsync). WAL frames are in order, so a forced commit makes every frame before
        # it durable too: an unforced write is never durable after a forced write that followed it. A forced
        # batch with nothing to write commits nothing (SQLite fsyncs only a commit that writes): the WAL file is
        # fsynced instead, as a FULL commit would have.
        sync = "NORMAL"
        if any(p.forced for p in batch):  # HATP-STORE-8
            sync = "FULL"
        with self._mutex:
            if any(p.entries for p in batch):
                if sync != self._sync:
                    self._db.execute(f"PRAGMA synchronous={sync}")
                    self._sync = sync
                cur = self._db.cursor()
                cur.execute("BEGIN IMMEDIATE")
                try:
                    for p in batch:
                        for e in p.entries:
                            self._write_entry(cur, p.txn_id, e)
                    cur.execute("COMMIT")
                except BaseException:
                    cur.execute("ROLLBACK")
                    raise
                self._unsynced = sync == "NORMAL"
            elif sync == "FULL" and self._unsynced:  # HATP-STORE-8: a forced append of nothing
                self._fsync_wal()
                self._unsynced = False
            self.batches += 1
        if self._on_durable is not None:
            self._on_durable(self.batches)

    def _fsync_wal(self) -> None:
        """Make the WAL's frames durable (what a FULL commit does after writing them). Raises OSError."""
        if self._wal is None:  # an in-memory database: nothing is durable
            return
        fd = os.open(self._wal, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _write_entry(cur: Any, txn_id: str, e: LogEntry) -> None:
        if e.kind == "plan":
            cur.execute("INSERT OR IGNORE INTO txn (txn_id, plan) VALUES (?, ?)", (txn_id, json_text(e.payload)))
        elif e.kind == "event":
            p = e.payload
            cur.execute("INSERT INTO txn_event (txn_id, seq, event) VALUES (?, ?, ?)", (txn_id, p["seq"], json_text(p)))
            if p.get("event") == "record.closed":
                cur.execute("UPDATE txn SET closed = 1 WHERE txn_id = ?", (txn_id,))
        elif e.kind == "decision":
            p = e.payload
            cur.execute(
                "INSERT INTO txn_decision (txn_id, n, decision, reason, at) VALUES (?,"
                " (SELECT COUNT(*) FROM txn_decision WHERE txn_id = ?), ?, ?, ?)",
                (txn_id, txn_id, p["decision"], p.get("reason"), p.get("at")),
            )
            cur.execute("UPDATE txn SET decision = ? WHERE txn_id = ?", (p["decision"], txn_id))
        else:
            raise ValueError(f"unknown log entry kind {e.kind!r}")

    def _load(self, txn_id: str) -> LoggedTxn | None:
        with self._mutex:
            row = self._db.execute("SELECT plan, decision FROM txn WHERE txn_id = ?", (txn_id,)).fetchone()
            if row is None:
                return None
            events = self._db.execute("SELECT event FROM txn_event WHERE txn_id = ? ORDER BY seq", (txn_id,)).fetchall()
        return LoggedTxn(txn_id, json.loads(row[0]), [json.loads(e[0]) for e in events], row[1])

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return await self._in_thread(self._load, txn_id)

    def _unfinished(self) -> list[str]:
        with self._mutex:
            return [r[0] for r in self._db.execute("SELECT txn_id FROM txn WHERE closed = 0 ORDER BY rowid")]

    async def unfinished(self) -> list[str]:
        return await self._in_thread(self._unfinished)

    def close(self) -> None:
        with self._mutex:  # a job in flight holds the mutex: closing waits for it
            self._db.close()

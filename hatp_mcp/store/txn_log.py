"""The coordinator's durable log: each transaction's plan, its record events and its decisions.

`TxnLog` is the small interface a PostgreSQL store can also serve. `SqliteTxnLog` (the embedded default, opened
with hatp_mcp.store.sqlite.open_db: WAL, synchronous=FULL) group-commits: appends from concurrent transactions
that arrive while a write is in flight are written together in the next transaction, one fsync for all of them.
A forced append returns only once it is durable; an unforced one (`forced=False`, spec/store.md HATP-STORE-8)
once it is written to the operating system, fsynced by the next forced write. This module stores what the
coordinator decided, forced or not; it decides nothing.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio

from hatp_mcp.errors import HatpError
from hatp_mcp.store.errors import LogInterrupted
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import json_text, open_db

__all__ = [
    "SQLITE_SCHEMA",
    "GroupCommit",
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
        operating system, so they survive the coordinator's process (HATP-STORE-8). A store may force every
        write."""
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


class GroupCommit:
    """Appends that arrive while a write is in flight are written together by the next one (one durable commit
    for all of them); each append returns once its batch is durable, or raises what the batch's write raised
    (nothing of a failed batch is kept: `write` is one database transaction). `write` may refuse one append of
    the batch alone by setting its `error` (and writing none of it): HATP-STORE-5."""

    def __init__(self, write: Callable[[Sequence[Pending]], Awaitable[None]]) -> None:
        self._write = write
        self.queue: list[Pending] = []
        self.writing = False
        self.appends = 0

    async def append(
        self, txn_id: str, entries: Sequence[LogEntry], epoch: int | None = None, forced: bool = True
    ) -> None:
        mine = Pending(txn_id, entries, epoch, forced)
        self.queue.append(mine)
        self.appends += 1
        if not self.writing:
            # The first appender leads: it writes batches until the queue is empty. Shielded: a decision
            # that is being written must be written (or fail) whole, even if the caller is cancelled.
            self.writing = True
            try:
                with anyio.CancelScope(shield=True):
                    while self.queue:
                        batch, self.queue = self.queue, []
                        error: BaseException | None = None
                        try:
                            await self._write(batch)
                        except Exception as exc:  # handed to every waiter of the batch
                            error = exc
                        except BaseException:
                            # The leader's task itself was cancelled (asyncio's own cancel passes an anyio
                            # shield): settle its batch and those queued behind it, or they wait forever.
                            interrupted = LogInterrupted("the log's writer was cancelled while this batch was written")
                            for p in (*batch, *self.queue):
                                p.error = interrupted
                                p.done.set()
                            self.queue = []
                            raise
                        for p in batch:
                            if error is not None:
                                p.error = error
                            p.done.set()
            finally:
                self.writing = False
        if not mine.done.is_set():  # the leader's own batch is settled already: no wait (and no extra wakeup)
            await mine.done.wait()
        if mine.error is not None:
            raise mine.error


def _hand_back(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[R], fn: Callable[..., R], args: Any) -> None:
    """On the log's thread: run `fn`, then settle `waiter` on its loop with what it returned or raised."""
    try:
        result = fn(*args)
    except BaseException as exc:  # handed to the awaiting coroutine, whatever it is
        loop.call_soon_threadsafe(_settle, waiter, None, exc)
    else:
        loop.call_soon_threadsafe(_settle, waiter, result, None)


def _settle(waiter: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if waiter.done():  # its caller was cancelled and stopped waiting
        return
    if error is not None:
        waiter.set_exception(error)
    else:
        waiter.set_result(result)


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
        self._group = GroupCommit(lambda batch: self._in_thread(self._write, batch))
        self._sync = "FULL"  # the connection's synchronous level now (open_db sets FULL)
        self._on_durable = on_durable
        self.batches = 0  # how many durable transactions were written (group commit makes it < appends)
        self._threads = 0
        self._executor: ThreadPoolExecutor | None = None

    @property
    def idle(self) -> bool:
        """No write or read is in flight (tests on a fake clock wait for this before moving the clock)."""
        return not self._group.writing and not self._group.queue and self._threads == 0

    @property
    def appends(self) -> int:
        return self._group.appends

    async def _in_thread(self, fn: Callable[..., R], *args: Any) -> R:
        """Run `fn` on the log's own thread (one: SQLite work is serialized by the mutex anyway) and await its
        result. The thread hands the result back with one call_soon_threadsafe that settles the awaited future
        (run_in_executor chains two futures: a callback more per hop, and a trip forces three writes). A caller
        cancelled while `fn` runs stops waiting; `fn` still runs to its end (as an executor job already started
        does), and a write is awaited shielded (GroupCommit)."""
        self._threads += 1
        try:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hatp-txn-log")
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[R] = loop.create_future()
            self._executor.submit(_hand_back, loop, waiter, fn, args)
            return await waiter
        finally:
            self._threads -= 1

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        """Raises whatever SQLite raised; nothing of the failed batch is kept."""
        await self._group.append(txn_id, entries, forced=forced)

    def _write(self, batch: Sequence[Pending]) -> None:
        # HATP-STORE-8: a batch is fsynced (FULL) when any append in it is forced; else only written to the OS
        # (NORMAL: WAL frames without fsync). WAL frames are in order, so a forced commit makes every frame before
        # it durable too: an unforced write is never durable after a forced write that followed it.
        sync = "NORMAL"
        if any(p.forced for p in batch):  # HATP-STORE-8
            sync = "FULL"
        with self._mutex:
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
            self.batches += 1
        if self._on_durable is not None:
            self._on_durable(self.batches)

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
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        with self._mutex:
            self._db.close()

"""The journal's durable store: each saga's signed record events, and the dead letters a person must finish.

`JournalStore` is the interface; `SqliteJournalStore` is the embedded default (opened with
hatp_mcp.store.sqlite.open_db: WAL, synchronous=FULL) and hatp_mcp.store.postgresql.journal_store serves the same
on PostgreSQL. One `append` is written inside one database transaction, so a step's entry and the dead letter
that goes with it are durable together or not at all, and an append returns only once it is durable
(HATP-JRN-2). Appends that arrive while a write is in flight are group-committed (`JournalGroupCommit`: one
transaction, one fsync, in the order they were submitted); an append queued behind a failed one of its saga is
refused, so a chain never has a gap. This module stores what the journal decided; it decides nothing and
verifies nothing.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel

from hatp_mcp.store.errors import LogInterrupted
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import json_text, open_db, require_forced

__all__ = [
    "SQLITE_SCHEMA",
    "DeadLetterRow",
    "JournalGroupCommit",
    "JournalStore",
    "MemoryJournalStore",
    "PendingAppend",
    "SqliteJournalStore",
    "StoredSaga",
]

R = TypeVar("R")


@dataclass
class StoredSaga:
    saga_id: str
    name: str
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def closed(self) -> bool:
        return bool(self.events) and self.events[-1].get("event") == "saga.closed"


@dataclass(frozen=True, slots=True)
class DeadLetterRow:
    id: int
    entry: dict[str, Any]
    alerted: bool


class JournalStore(Protocol):
    async def append(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> list[int]:
        """Durably write `events` (the saga's next signed record events, in order) and `dead_letters` together,
        before returning the dead letters' ids. The first append of a saga creates it under `name`."""
        ...

    def submit(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> Awaitable[list[int]]:
        """`append`, queued now, in call order (so a caller may stop holding its lock before the write is done);
        awaiting the result waits until it is durable and raises what the write raised."""
        ...

    async def load(self, saga_id: str) -> StoredSaga | None: ...

    async def unfinished(self) -> list[str]:
        """Sagas whose record is not closed, oldest first: recovery finishes them (HATP-JRN-10)."""
        ...

    async def sagas(self) -> list[str]: ...

    async def dead_letters(self, *, unalerted_only: bool = False) -> list[DeadLetterRow]: ...

    async def mark_alerted(self, dead_letter_id: int) -> None: ...


class MemoryJournalStore:
    """Not durable: for tests that do not crash (and to show what a store must keep)."""

    def __init__(self) -> None:
        self._sagas: dict[str, StoredSaga] = {}
        self._dead: list[DeadLetterRow] = []

    async def append(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> list[int]:
        saga = self._sagas.setdefault(saga_id, StoredSaga(saga_id, name))
        saga.events.extend(dict(e) for e in events)
        ids = []
        for d in dead_letters:
            self._dead.append(DeadLetterRow(len(self._dead) + 1, dict(d), False))
            ids.append(len(self._dead))
        await anyio.lowlevel.checkpoint()
        return ids

    def submit(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> Awaitable[list[int]]:
        return self.append(saga_id, name, list(events), list(dead_letters))

    async def load(self, saga_id: str) -> StoredSaga | None:
        saga = self._sagas.get(saga_id)
        return StoredSaga(saga.saga_id, saga.name, list(saga.events)) if saga else None

    async def unfinished(self) -> list[str]:
        return [s for s, v in self._sagas.items() if not v.closed]

    async def sagas(self) -> list[str]:
        return list(self._sagas)

    async def dead_letters(self, *, unalerted_only: bool = False) -> list[DeadLetterRow]:
        return [d for d in self._dead if not (unalerted_only and d.alerted)]

    async def mark_alerted(self, dead_letter_id: int) -> None:
        self._dead = [DeadLetterRow(d.id, d.entry, True) if d.id == dead_letter_id else d for d in self._dead]


SQLITE_SCHEMA = Schema(
    "journal",
    (
        (  # IF NOT EXISTS: a journal.db written before the schema was versioned is taken up as version 1
            "CREATE TABLE IF NOT EXISTS journal_saga (saga_id TEXT PRIMARY KEY, name TEXT NOT NULL,"
            " closed INTEGER NOT NULL DEFAULT 0)",
            "CREATE TABLE IF NOT EXISTS journal_event (saga_id TEXT NOT NULL, seq INTEGER NOT NULL,"
            " event TEXT NOT NULL, PRIMARY KEY (saga_id, seq))",
            "CREATE TABLE IF NOT EXISTS journal_dead_letter (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " saga_id TEXT NOT NULL, entry TEXT NOT NULL, alerted INTEGER NOT NULL DEFAULT 0)",
        ),
    ),
)


@dataclass
class PendingAppend:
    """One append waiting in a group commit; the write sets `ids` (its dead letters' ids, in order)."""

    saga_id: str
    name: str
    events: list[dict[str, Any]]
    dead_letters: list[dict[str, Any]]
    done: anyio.Event = field(default_factory=anyio.Event)
    ids: list[int] = field(default_factory=list)
    error: BaseException | None = None


class JournalGroupCommit:
    """The queue in front of a journal store's writes: appends submitted while a write is in flight are written
    together by the next `write(batch)` (one database transaction: the whole batch or none of it), in the order
    they were submitted. `on_durable(n)` runs after the n-th durable batch (crash tests stop the process there)."""

    def __init__(
        self,
        write: Callable[[list[PendingAppend]], Awaitable[None]],
        on_durable: Callable[[int], None] | None = None,
    ) -> None:
        self._write = write
        self._on_durable = on_durable
        self._queue: list[PendingAppend] = []
        self._writing = False
        self._failed: dict[str, int] = {}  # saga -> the first seq of an append that failed
        self.appends = 0  # durable batches written

    def submit(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> Awaitable[list[int]]:
        mine = PendingAppend(saga_id, name, list(events), list(dead_letters))
        self._queue.append(mine)  # queued now: the order of submit calls is the order of the writes
        return self._wait(mine)

    async def _wait(self, mine: PendingAppend) -> list[int]:
        if not self._writing:
            # The first waiter leads: it writes batches until the queue is empty. Shielded: an entry being
            # written is written whole or not at all, even if the caller is cancelled.
            self._writing = True
            try:
                with anyio.CancelScope(shield=True):
                    while self._queue:
                        batch, self._queue = self._queue, []
                        batch = self._refuse_after_failures(batch)
                        if not batch:  # every append of it was refused: nothing to write
                            continue
                        error: BaseException | None = None
                        try:
                            await self._write(batch)
                        except Exception as exc:  # handed to every waiter of the batch
                            error = exc
                        except BaseException:
                            # The leader's task itself was cancelled (asyncio's own cancel passes an anyio
                            # shield): settle its batch and those queued behind it as failed, or they wait forever.
                            self._interrupted([*batch, *self._queue])
                            self._queue = []
                            raise
                        for p in batch:
                            p.error = error
                            if error is not None and p.events:
                                self._failed.setdefault(p.saga_id, int(p.events[0]["seq"]))
                            p.done.set()
                        if error is None:
                            self.appends += 1
                            if self._on_durable is not None:
                                self._on_durable(self.appends)
            finally:
                self._writing = False
        await mine.done.wait()
        if mine.error is not None:
            raise mine.error
        return mine.ids

    def _interrupted(self, settled: list[PendingAppend]) -> None:
        interrupted = LogInterrupted("the journal's writer was cancelled while this batch was written")
        for p in settled:
            p.error = interrupted
            if p.events:
                self._failed.setdefault(p.saga_id, int(p.events[0]["seq"]))
            p.done.set()

    def _refuse_after_failures(self, batch: list[PendingAppend]) -> list[PendingAppend]:
        """An append queued behind one of its saga's appends that failed would leave a gap in the chain: refuse it.
        A writer that starts again from what is durable (seq at or before the failed one) clears the refusal."""
        out = []
        for p in batch:
            first = int(p.events[0]["seq"]) if p.events else None
            failed = self._failed.get(p.saga_id)
            if failed is not None and first is not None and first <= failed:
                del self._failed[p.saga_id]
            elif failed is not None:
                p.error = RuntimeError(f"saga {p.saga_id}: an earlier append (seq {failed}) failed; not written")
                p.done.set()
                continue
            out.append(p)
        return out


class SqliteJournalStore:
    """SQLite journal store with group commit (`JournalGroupCommit`). `on_durable(n)` runs after each durable
    batch. Raises HatpError HATP-STORE-1 when the file's schema is newer than this code's."""

    def __init__(self, path: str | Path, *, on_durable: Callable[[int], None] | None = None) -> None:
        self._db = open_db(path)
        require_forced(self._db, "HATP-JRN-25", "journal")  # both of a call's writes are fsynced
        migrate_sqlite(self._db, SQLITE_SCHEMA, str(path))
        self._mutex = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._group = JournalGroupCommit(lambda batch: self._run(self._write, batch), on_durable)

    @property
    def appends(self) -> int:
        """Durable batches written (group commit makes it fewer than the appends)."""
        return self._group.appends

    async def _run(self, fn: Callable[..., R], *args: Any) -> R:
        """Run `fn` on the store's own thread (one: SQLite work is serialized by the mutex anyway), as the decision
        log does (hatp_mcp/store/txn_log.py): an asyncio executor hop is cheaper than anyio.to_thread's, and a
        journaled call makes two appends in sequence."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hatp-journal")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def append(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> list[int]:
        """Raises whatever SQLite raised (a seq written twice: IntegrityError); nothing of a failed batch is kept."""
        return await self.submit(saga_id, name, events, dead_letters)

    def submit(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> Awaitable[list[int]]:
        return self._group.submit(saga_id, name, events, dead_letters)

    def _write(self, batch: list[PendingAppend]) -> None:
        with self._mutex:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                for p in batch:
                    p.ids = self._write_one(cur, p)
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise

    @staticmethod
    def _write_one(cur: Any, p: PendingAppend) -> list[int]:
        cur.execute("INSERT OR IGNORE INTO journal_saga (saga_id, name) VALUES (?, ?)", (p.saga_id, p.name))
        for e in p.events:
            cur.execute(
                "INSERT INTO journal_event (saga_id, seq, event) VALUES (?, ?, ?)", (p.saga_id, e["seq"], json_text(e))
            )
            if e.get("event") == "saga.closed":
                cur.execute("UPDATE journal_saga SET closed = 1 WHERE saga_id = ?", (p.saga_id,))
        ids = []
        for d in p.dead_letters:
            cur.execute("INSERT INTO journal_dead_letter (saga_id, entry) VALUES (?, ?)", (p.saga_id, json_text(d)))
            ids.append(int(cur.lastrowid or 0))
        return ids

    def _load(self, saga_id: str) -> StoredSaga | None:
        with self._mutex:
            row = self._db.execute("SELECT name FROM journal_saga WHERE saga_id = ?", (saga_id,)).fetchone()
            if row is None:
                return None
            rows = self._db.execute(
                "SELECT event FROM journal_event WHERE saga_id = ? ORDER BY seq", (saga_id,)
            ).fetchall()
        return StoredSaga(saga_id, row[0], [json.loads(r[0]) for r in rows])

    async def load(self, saga_id: str) -> StoredSaga | None:
        return await self._run(self._load, saga_id)

    def _ids(self, where: str) -> list[str]:
        with self._mutex:
            return [r[0] for r in self._db.execute(f"SELECT saga_id FROM journal_saga {where} ORDER BY rowid")]

    async def unfinished(self) -> list[str]:
        return await self._run(self._ids, "WHERE closed = 0")

    async def sagas(self) -> list[str]:
        return await self._run(self._ids, "")

    def _dead(self, unalerted_only: bool) -> list[DeadLetterRow]:
        query = "SELECT id, entry, alerted FROM journal_dead_letter"
        with self._mutex:
            rows = self._db.execute(query + (" WHERE alerted = 0" if unalerted_only else "") + " ORDER BY id")
            return [DeadLetterRow(int(r[0]), json.loads(r[1]), bool(r[2])) for r in rows]

    async def dead_letters(self, *, unalerted_only: bool = False) -> list[DeadLetterRow]:
        return await self._run(self._dead, unalerted_only)

    def _mark(self, dead_letter_id: int) -> None:
        with self._mutex:
            self._db.execute("UPDATE journal_dead_letter SET alerted = 1 WHERE id = ?", (dead_letter_id,))

    async def mark_alerted(self, dead_letter_id: int) -> None:
        await self._run(self._mark, dead_letter_id)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        with self._mutex:
            self._db.close()

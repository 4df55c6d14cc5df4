"""The journal's durable store: each saga's signed record events, and the dead letters a person must finish.

`JournalStore` is the interface; `SqliteJournalStore` is the embedded default (opened with
hatp_mcp.store.sqlite.open_db: WAL, synchronous=FULL) and hatp_mcp.store.postgresql.journal_store serves the same
on PostgreSQL. One `append` is written inside one database transaction, so a step's entry and the dead letter
that goes with it are durable together or not at all, and an append returns only once it is durable
(HATP-JRN-2). Appends that arrive while a write is in flight are group-committed (`journal_group`, on
hatp_mcp.store.group_commit: one transaction, one fsync, in the order they were submitted); an append queued behind
a failed one of its saga is refused (`ChainGaps`), so a chain never has a gap. This module stores what the journal
decided; it decides nothing and verifies nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread

from hatp_mcp.store.group_commit import GroupCommit
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import json_text, open_db, require_forced

__all__ = [
    "SQLITE_SCHEMA",
    "ChainGaps",
    "DeadLetterRow",
    "JournalStore",
    "MemoryJournalStore",
    "PendingAppend",
    "SqliteJournalStore",
    "StoredSaga",
    "journal_group",
    "submit_append",
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


class ChainGaps:
    """The journal's rule in front of its group commit: an append queued behind a failed append of its saga would
    leave a gap in the chain, so it is refused (`admit`) until a writer starts again from what is durable (seq at
    or before the failed one). `failed` hears of the appends a failed or interrupted write settled."""

    def __init__(self) -> None:
        self._failed: dict[str, int] = {}  # saga -> the first seq of an append that failed

    def failed(self, settled: Sequence[PendingAppend]) -> None:
        for p in settled:
            if p.events:
                self._failed.setdefault(p.saga_id, int(p.events[0]["seq"]))

    def admit(self, batch: list[PendingAppend]) -> list[PendingAppend]:
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


def journal_group(
    write: Callable[[list[PendingAppend]], Awaitable[None]], on_durable: Callable[[int], None] | None = None
) -> GroupCommit[PendingAppend]:
    """The group commit of a journal store (SQLite or PostgreSQL): `write` one batch in one database transaction,
    appends behind a failed one of their saga refused (`ChainGaps`)."""
    gaps = ChainGaps()
    return GroupCommit(write, admit=gaps.admit, failed=gaps.failed, on_durable=on_durable)


def submit_append(
    group: GroupCommit[PendingAppend],
    saga_id: str,
    name: str,
    events: Sequence[dict[str, Any]],
    dead_letters: Sequence[dict[str, Any]] = (),
) -> Awaitable[list[int]]:
    """Queue one append now (the order of the calls is the order of the writes); the awaitable returns its dead
    letters' ids once it is durable, or raises what settled it."""
    mine = PendingAppend(saga_id, name, list(events), list(dead_letters))
    return _ids(group.submit(mine), mine)


async def _ids(written: Awaitable[None], mine: PendingAppend) -> list[int]:
    await written
    return mine.ids


class SqliteJournalStore:
    """SQLite journal store with group commit (`journal_group`). `on_durable(n)` runs after each durable
    batch. Raises HatpError HATP-STORE-1 when the file's schema is newer than this code's."""

    def __init__(self, path: str | Path, *, on_durable: Callable[[int], None] | None = None) -> None:
        self._db = open_db(path)
        require_forced(self._db, "HATP-JRN-25", "journal")  # both of a call's writes are fsynced
        migrate_sqlite(self._db, SQLITE_SCHEMA, str(path))
        self._mutex = threading.Lock()
        self._group = journal_group(lambda batch: self._run(self._write, batch), on_durable)

    @property
    def appends(self) -> int:
        """Durable batches written (group commit makes it fewer than the appends)."""
        return self._group.batches

    async def _run(self, fn: Callable[..., R], *args: Any) -> R:
        """Run `fn` on a worker thread (anyio.to_thread; SQLite work is serialized by the mutex) and await its
        result. A caller cancelled while `fn` runs stops waiting; `fn` still runs to its end, and a write is
        awaited shielded (the group commit)."""
        return await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)

    async def append(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> list[int]:
        """Raises whatever SQLite raised (a seq written twice: IntegrityError); nothing of a failed batch is kept."""
        return await self.submit(saga_id, name, events, dead_letters)

    def submit(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> Awaitable[list[int]]:
        return submit_append(self._group, saga_id, name, events, dead_letters)

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
        with self._mutex:  # a job in flight holds the mutex: closing waits for it
            self._db.close()

"""The journal's store on PostgreSQL: the `JournalStore` of hatp_mcp.store.journal_store, shared by journal
processes on one database.

Appends are group-committed as on SQLite (hatp_mcp.store.journal_store.journal_group): those submitted while a
write is in flight go together in the next database transaction, one commit (one WAL flush) for all, in the order
they were submitted.
An append returns only once its transaction committed (synchronous_commit on, HATP-STORE-3: durable), so a
step's `step.started` is on disk before its call goes out (HATP-JRN-2), and a step's entries and its dead letter
are committed together or not at all. A write whose connection was lost before its commit was sent runs again
whole on a fresh connection (hatp_mcp.store.postgresql.pools.run_async); one lost during the commit raises, and
the saga is then rebuilt from what the database holds. This module stores what the journal decided; it decides
nothing and verifies nothing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from hatp_mcp.store.journal_store import DeadLetterRow, PendingAppend, StoredSaga, journal_group, submit_append
from hatp_mcp.store.postgresql.pools import open_async_pool, run_async
from hatp_mcp.store.schema import Schema
from hatp_mcp.store.sqlite import json_text

__all__ = ["SCHEMA", "PostgresJournalStore"]

SCHEMA = Schema(
    "journal",
    (
        (
            "CREATE TABLE journal_saga (saga_id TEXT PRIMARY KEY, name TEXT NOT NULL,"
            " closed BOOLEAN NOT NULL DEFAULT FALSE, begun BIGINT GENERATED ALWAYS AS IDENTITY)",
            "CREATE INDEX journal_saga_unfinished ON journal_saga (begun) WHERE NOT closed",
            "CREATE TABLE journal_event (saga_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL,"
            " PRIMARY KEY (saga_id, seq))",
            "CREATE TABLE journal_dead_letter (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
            " saga_id TEXT NOT NULL, entry TEXT NOT NULL, alerted BOOLEAN NOT NULL DEFAULT FALSE)",
            "CREATE INDEX journal_dead_letter_unalerted ON journal_dead_letter (id) WHERE NOT alerted",
        ),
    ),
)

Row = tuple[object, ...]


class PostgresJournalStore:
    """Open with `await PostgresJournalStore.open(url)`; `await aclose()` it. `on_durable(n)` runs after each
    durable batch (crash tests stop the process there)."""

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Row]], *, on_durable: Callable[[int], None] | None = None
    ) -> None:
        self._pool = pool
        self._group = journal_group(self._write, on_durable)

    @classmethod
    async def open(cls, url: str, *, on_durable: Callable[[int], None] | None = None) -> PostgresJournalStore:
        """Raises StoreUnreachable (no connection), HatpError HATP-STORE-1 (a newer schema) or HATP-STORE-3
        (a server that acknowledges commits before they are durable)."""
        return cls(await open_async_pool(url, SCHEMA), on_durable=on_durable)

    async def aclose(self) -> None:
        await self._pool.close()

    @property
    def appends(self) -> int:
        """Durable batches written (group commit makes it fewer than the appends)."""
        return self._group.batches

    async def append(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> list[int]:
        """Raises what psycopg raised (IntegrityError for a seq written twice; OperationalError when the connection
        was lost during the commit or on every try); nothing of a failed batch is kept."""
        return await self.submit(saga_id, name, events, dead_letters)

    def submit(
        self, saga_id: str, name: str, events: Sequence[dict[str, Any]], dead_letters: Sequence[dict[str, Any]] = ()
    ) -> Awaitable[list[int]]:
        return submit_append(self._group, saga_id, name, events, dead_letters)

    async def _write(self, batch: list[PendingAppend]) -> None:
        async def write(conn: AsyncConnection[Row]) -> None:
            async with conn.cursor() as cur:
                for p in batch:
                    p.ids = []  # a write run again (its connection lost before the commit) starts afresh
                    await cur.execute(
                        "INSERT INTO journal_saga (saga_id, name) VALUES (%s, %s) ON CONFLICT (saga_id) DO NOTHING",
                        (p.saga_id, p.name),
                    )
                    for e in p.events:
                        await cur.execute(
                            "INSERT INTO journal_event (saga_id, seq, event) VALUES (%s, %s, %s)",
                            (p.saga_id, e["seq"], json_text(e)),
                        )
                        if e.get("event") == "saga.closed":
                            await cur.execute("UPDATE journal_saga SET closed = TRUE WHERE saga_id = %s", (p.saga_id,))
                    for d in p.dead_letters:
                        await cur.execute(
                            "INSERT INTO journal_dead_letter (saga_id, entry) VALUES (%s, %s) RETURNING id",
                            (p.saga_id, json_text(d)),
                        )
                        row = await cur.fetchone()
                        p.ids.append(int(str(row[0])) if row else 0)

        await run_async(self._pool, write, idempotent=False)  # one transaction: the whole batch or none of it

    async def load(self, saga_id: str) -> StoredSaga | None:
        async def read(conn: AsyncConnection[Row]) -> Row | None:
            found = await conn.execute(  # one statement: one snapshot of the saga and its events
                "SELECT name, ARRAY(SELECT event FROM journal_event e WHERE e.saga_id = s.saga_id ORDER BY seq)"
                " FROM journal_saga s WHERE saga_id = %s",
                (saga_id,),
            )
            return await found.fetchone()

        row = await run_async(self._pool, read, idempotent=True)
        if row is None:
            return None
        name, events = row
        if not isinstance(events, list):  # ARRAY(...) is always a list, empty when there are no events
            raise TypeError(f"journal_event of {saga_id}: expected an array, got {type(events).__name__}")
        return StoredSaga(saga_id, str(name), [json.loads(str(e)) for e in events])

    async def _ids(self, where: str) -> list[str]:
        async def read(conn: AsyncConnection[Row]) -> list[Row]:
            query = f"SELECT saga_id FROM journal_saga {where} ORDER BY begun"
            return await (await conn.execute(query.encode())).fetchall()

        return [str(r[0]) for r in await run_async(self._pool, read, idempotent=True)]

    async def unfinished(self) -> list[str]:
        return await self._ids("WHERE NOT closed")

    async def sagas(self) -> list[str]:
        return await self._ids("")

    async def dead_letters(self, *, unalerted_only: bool = False) -> list[DeadLetterRow]:
        where = " WHERE NOT alerted" if unalerted_only else ""

        async def read(conn: AsyncConnection[Row]) -> list[Row]:
            query = "SELECT id, entry, alerted FROM journal_dead_letter" + where + " ORDER BY id"
            return await (await conn.execute(query.encode())).fetchall()

        rows = await run_async(self._pool, read, idempotent=True)
        return [DeadLetterRow(int(str(r[0])), json.loads(str(r[1])), bool(r[2])) for r in rows]

    async def mark_alerted(self, dead_letter_id: int) -> None:
        async def mark(conn: AsyncConnection[Row]) -> None:
            await conn.execute("UPDATE journal_dead_letter SET alerted = TRUE WHERE id = %s", (dead_letter_id,))

        await run_async(self._pool, mark, idempotent=True)  # one statement whose second run changes nothing

"""The coordinator's decision log on PostgreSQL: the `TxnLog` of hatp_mcp.store.txn_log, shared by coordinators.

Appends are group-committed as on SQLite (hatp_mcp.store.txn_log.GroupCommit): those arriving while a write is in
flight go together in the next database transaction, one commit (one WAL flush) for all. An append returns only
once its transaction committed (synchronous_commit on: durable), so HATP-TXN-4's forced writes really are on disk
before the sends that follow them. This module stores what the coordinator decided; it decides nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from psycopg import AsyncConnection, AsyncCursor
from psycopg_pool import AsyncConnectionPool

from hatp_mcp.store.postgresql.pools import open_async_pool, run_async
from hatp_mcp.store.schema import Schema
from hatp_mcp.store.sqlite import json_text
from hatp_mcp.store.txn_log import GroupCommit, LogEntry, LoggedTxn, Pending

__all__ = ["SCHEMA", "PostgresTxnLog"]

SCHEMA = Schema(
    "coordinator.log",
    (
        (
            "CREATE TABLE txn (txn_id TEXT PRIMARY KEY, plan TEXT NOT NULL, decision TEXT,"
            " closed BOOLEAN NOT NULL DEFAULT FALSE, begun BIGINT GENERATED ALWAYS AS IDENTITY)",
            "CREATE INDEX txn_unfinished ON txn (begun) WHERE NOT closed",
            "CREATE TABLE txn_event (txn_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL,"
            " PRIMARY KEY (txn_id, seq))",
            "CREATE TABLE txn_decision (txn_id TEXT NOT NULL, n INTEGER NOT NULL, decision TEXT NOT NULL,"
            " reason TEXT, at TEXT, PRIMARY KEY (txn_id, n))",
        ),
    ),
)

Row = tuple[object, ...]


class PostgresTxnLog:
    """Open with `await PostgresTxnLog.open(url)`; `await aclose()` it."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Row]]) -> None:
        self._pool = pool
        self._group = GroupCommit(self._write)
        self.batches = 0  # durable transactions written (group commit makes it < appends)
        self._reads = 0  # loads in flight (tests on a fake clock wait for them, as for writes)

    @classmethod
    async def open(cls, url: str) -> PostgresTxnLog:
        """Raises psycopg.OperationalError / psycopg_pool.PoolTimeout (unreachable) or HatpError HATP-STORE-1."""
        return cls(await open_async_pool(url, SCHEMA))

    async def aclose(self) -> None:
        await self._pool.close()

    @property
    def appends(self) -> int:
        return self._group.appends

    @property
    def idle(self) -> bool:
        """No write or read is in flight (tests on a fake clock wait for this before moving the clock)."""
        return not self._group.writing and not self._group.queue and self._reads == 0

    async def append(self, txn_id: str, entries: Sequence[LogEntry]) -> None:
        """Raises what psycopg raised (OperationalError when the connection was lost during the commit or on every
        try, IntegrityError for an event seq written twice); nothing of a failed batch is kept."""
        await self._group.append(txn_id, entries)

    async def _write(self, batch: Sequence[Pending]) -> None:
        async def write(conn: AsyncConnection[Row]) -> None:
            # pipelined: the batch's statements go out together, one round trip before the commit's
            async with conn.pipeline(), conn.cursor() as cur:
                for p in batch:
                    for e in p.entries:
                        await self._write_entry(cur, p.txn_id, e)

        await run_async(self._pool, write, idempotent=False)  # one transaction: the whole batch or none of it
        self.batches += 1

    @staticmethod
    async def _write_entry(cur: AsyncCursor[Row], txn_id: str, e: LogEntry) -> None:
        p = e.payload
        if e.kind == "plan":
            await cur.execute(
                "INSERT INTO txn (txn_id, plan) VALUES (%s, %s) ON CONFLICT (txn_id) DO NOTHING",
                (txn_id, json_text(p)),
            )
        elif e.kind == "event":
            await cur.execute(
                "INSERT INTO txn_event (txn_id, seq, event) VALUES (%s, %s, %s)", (txn_id, p["seq"], json_text(p))
            )
            if p.get("event") == "record.closed":
                await cur.execute("UPDATE txn SET closed = TRUE WHERE txn_id = %s", (txn_id,))
        elif e.kind == "decision":
            await cur.execute(
                "INSERT INTO txn_decision (txn_id, n, decision, reason, at) VALUES (%s,"
                " (SELECT COUNT(*) FROM txn_decision WHERE txn_id = %s), %s, %s, %s)",
                (txn_id, txn_id, p["decision"], p.get("reason"), p.get("at")),
            )
            await cur.execute("UPDATE txn SET decision = %s WHERE txn_id = %s", (p["decision"], txn_id))
        else:
            raise ValueError(f"unknown log entry kind {e.kind!r}")

    async def load(self, txn_id: str) -> LoggedTxn | None:
        self._reads += 1
        try:
            return await self._load(txn_id)
        finally:
            self._reads -= 1

    async def _load(self, txn_id: str) -> LoggedTxn | None:
        async def read(conn: AsyncConnection[Row]) -> Row | None:
            found = await conn.execute(  # one statement: one snapshot of the plan, the decision and the events
                "SELECT plan, decision, ARRAY(SELECT event FROM txn_event e WHERE e.txn_id = t.txn_id ORDER BY seq)"
                " FROM txn t WHERE txn_id = %s",
                (txn_id,),
            )
            return await found.fetchone()

        row = await run_async(self._pool, read, idempotent=True)
        if row is None:
            return None
        plan, decision, events = row
        if not isinstance(events, list):  # ARRAY(...) is always a list, empty when there are no events
            raise TypeError(f"txn_event of {txn_id}: expected an array, got {type(events).__name__}")
        return LoggedTxn(
            txn_id,
            json.loads(str(plan)),
            [json.loads(str(e)) for e in events],
            str(decision) if decision is not None else None,
        )

    async def unfinished(self) -> list[str]:
        self._reads += 1

        async def read(conn: AsyncConnection[Row]) -> list[Row]:
            return await (await conn.execute("SELECT txn_id FROM txn WHERE NOT closed ORDER BY begun")).fetchall()

        try:
            rows = await run_async(self._pool, read, idempotent=True)
        finally:
            self._reads -= 1
        return [str(r[0]) for r in rows]

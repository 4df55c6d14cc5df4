"""The coordinator's decision log on PostgreSQL: the `TxnLog` of hatp_mcp.store.txn_log, shared by coordinators.

Appends are group-committed as on SQLite (hatp_mcp.store.group_commit.GroupCommit): those arriving while a write
is in flight go together in the next database transaction, one commit (one WAL flush) for all. An append returns only
once its transaction committed. A batch holding a forced append commits with synchronous_commit on (durable), so
HATP-TXN-4's forced writes really are on disk before the sends that follow them; a batch of unforced appends only
(spec/store.md HATP-STORE-9) commits with synchronous_commit off for that database transaction alone: visible at
once, flushed by the next forced commit (the WAL is one sequence: a flush covers every commit before it). This
module stores what the coordinator decided; it decides nothing.

Ownership (spec/store.md HATP-STORE-4..6): `txn_lease` holds each transaction's owner, epoch and lease expiry, on
the database's clock (one clock for every coordinator). The append of a plan makes its appender the owner at
epoch 1; every later append is checked, in its write's own database transaction and under a row lock, against
the epoch its appender holds, and refused (HATP-STORE-5, STALE_COORDINATOR) when another coordinator took the
transaction over since. `take_lapsed` takes over lapsed leases with ``FOR UPDATE SKIP LOCKED``: coordinators
looking at once share the lapsed transactions, never both taking one. Skipping a locked row must not mean skipping
it for ever: the server ends a session of this log that sits idle inside a database transaction for longer than
half a lease (HATP-STORE-7), so a coordinator stopped in the middle of a write (paused, or its machine gone with
its TCP connection still open) lets go of the lease rows it locked, and its lapsed transactions are taken over.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from psycopg import AsyncConnection, AsyncCursor
from psycopg_pool import AsyncConnectionPool

from hatp_mcp.store.group_commit import GroupCommit
from hatp_mcp.store.owner import default_owner
from hatp_mcp.store.postgresql.pools import open_async_pool, run_async
from hatp_mcp.store.schema import Schema
from hatp_mcp.store.sqlite import json_text
from hatp_mcp.store.txn_log import Lease, LogEntry, LoggedTxn, Pending, not_owner

__all__ = ["SCHEMA", "PostgresTxnLog", "session_options"]

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
        (  # 2: ownership leases (HATP-STORE-4); transactions left open before it are lapsed at epoch 0
            "CREATE TABLE txn_lease (txn_id TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch BIGINT NOT NULL,"
            " lease_until TIMESTAMPTZ)",
            "INSERT INTO txn_lease (txn_id, owner, epoch, lease_until) SELECT txn_id, '', 0, NULL FROM txn"
            " WHERE NOT closed",
        ),
    ),
)

_LEASED = "clock_timestamp() + make_interval(secs => %s)"

Row = tuple[object, ...]


def session_options(lease_seconds: float) -> str:
    """HATP-STORE-7: the libpq options of every session of a log whose leases last `lease_seconds`: idle inside a
    database transaction for half a lease (at least 1 s), the server ends the session and rolls it back."""
    limit_ms = max(int(lease_seconds * 500), 1000)
    return f"-c idle_in_transaction_session_timeout={limit_ms}"


class PostgresTxnLog:
    """Open with `await PostgresTxnLog.open(url)`; `await aclose()` it. `owner`: this coordinator's owner id in
    `txn_lease`; `lease_seconds`: how long a lease lasts unrenewed (the owner renews at a third of it)."""

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Row]], owner: str | None = None, lease_seconds: float = 30.0
    ) -> None:
        if lease_seconds < 0:
            raise ValueError(f"lease_seconds must be >= 0, not {lease_seconds}")
        self._pool = pool
        self.owner = owner or default_owner()
        self.lease_seconds = lease_seconds
        self._held: dict[str, int] = {}  # txnId -> the epoch this coordinator owns it at
        self._group: GroupCommit[Pending] = GroupCommit(self._write)
        self.batches = 0  # durable transactions written (group commit makes it < appends)
        self._reads = 0  # loads in flight (tests on a fake clock wait for them, as for writes)

    @classmethod
    async def open(cls, url: str, owner: str | None = None, lease_seconds: float = 30.0) -> PostgresTxnLog:
        """Raises psycopg.OperationalError / psycopg_pool.PoolTimeout (unreachable) or HatpError HATP-STORE-1."""
        pool = await open_async_pool(url, SCHEMA, options=session_options(lease_seconds))
        return cls(pool, owner, lease_seconds)

    async def aclose(self) -> None:
        await self._pool.close()

    @property
    def appends(self) -> int:
        return self._group.submitted

    @property
    def idle(self) -> bool:
        """No write or read is in flight (tests on a fake clock wait for this before moving the clock)."""
        return not self._group.writing and not self._group.queue and self._reads == 0

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        """Raises what psycopg raised (OperationalError when the connection was lost during the commit or on every
        try, IntegrityError for an event seq written twice); nothing of a failed batch is kept. Raises HatpError
        HATP-STORE-5 (STALE_COORDINATOR), writing nothing of this append, when this coordinator does not own
        `txn_id` at the current epoch (a plan: another coordinator began it). `forced`: the commit waits for the
        WAL's flush (HATP-STORE-8); unforced, the append shares a forced one's commit when they meet in one batch,
        else commits without waiting for the disk (HATP-STORE-9)."""
        starts = any(e.kind == "plan" for e in entries)
        await self._group.submit(Pending(txn_id, entries, 0 if starts else self._held.get(txn_id), forced=forced))
        if starts:
            self._held.setdefault(txn_id, 1)

    async def _write(self, batch: Sequence[Pending]) -> None:
        async def write(conn: AsyncConnection[Row]) -> None:
            for p in batch:
                p.error = None  # a retried write judges every append anew
            async with conn.cursor() as cur:
                # one forced append forces the whole batch; SET LOCAL: this database transaction alone
                if not any(p.forced for p in batch):  # HATP-STORE-9
                    await cur.execute("SET LOCAL synchronous_commit TO off")
                elif not any(p.entries for p in batch):  # a forced append of nothing: its commit flushes the WAL
                    await cur.execute("SELECT pg_current_xact_id()")  # no id: no commit record, no flush
                await self._fence(cur, batch)
            # pipelined: the batch's statements go out together, one round trip before the commit's
            async with conn.pipeline(), conn.cursor() as cur:
                for p in batch:
                    if p.error is None:
                        for e in p.entries:
                            await self._write_entry(cur, p.txn_id, e)

        await run_async(self._pool, write, idempotent=False)  # one transaction: the whole batch or none of it
        self.batches += 1

    async def _fence(self, cur: AsyncCursor[Row], batch: Sequence[Pending]) -> None:
        """HATP-STORE-4/5, inside the write's transaction: a plan's append takes the lease at epoch 1 (refused when
        the txnId has an owner); every other append must hold the current epoch, checked under a share lock on the
        lease row, so a takeover (which updates the row) waits for this write or comes after it, never between."""
        new = sorted({p.txn_id for p in batch if p.epoch == 0})
        for txn_id in new:
            await cur.execute(
                f"INSERT INTO txn_lease (txn_id, owner, epoch, lease_until) VALUES (%s, %s, 1, {_LEASED})"
                " ON CONFLICT (txn_id) DO NOTHING RETURNING epoch",
                (txn_id, self.owner, self.lease_seconds),
            )
            if await cur.fetchone() is None:
                await cur.execute("SELECT owner, epoch FROM txn_lease WHERE txn_id = %s", (txn_id,))
                row = await cur.fetchone()
                owner, epoch = row if row is not None else (None, None)
                if owner == self.owner and self._held.get(txn_id) == epoch:
                    continue  # this coordinator's own plan, appended again (begin is idempotent)
                for p in batch:
                    if p.txn_id == txn_id:
                        p.error = not_owner(txn_id, None, epoch, owner)
        rest = sorted({p.txn_id for p in batch if p.epoch != 0})
        current: dict[str, tuple[object, object]] = {}
        if rest:
            await cur.execute(
                "SELECT txn_id, owner, epoch FROM txn_lease WHERE txn_id = ANY(%s) ORDER BY txn_id FOR SHARE",
                (rest,),
            )
            current = {str(r[0]): (r[1], r[2]) for r in await cur.fetchall()}
        for p in batch:
            if p.epoch == 0 or p.error is not None:
                continue
            owner, epoch = current.get(p.txn_id, (None, None))
            if p.epoch is None or owner != self.owner or epoch != p.epoch:
                p.error = not_owner(p.txn_id, p.epoch, epoch, owner)
                if self._held.get(p.txn_id) == p.epoch:
                    self._held.pop(p.txn_id, None)  # lost: stop renewing it

    # -- ownership (HATP-STORE-4..6) ----------------------------------------------------------------------
    def epoch(self, txn_id: str) -> int | None:
        return self._held.get(txn_id)

    def release(self, txn_id: str) -> None:
        self._held.pop(txn_id, None)

    async def renew(self) -> list[str]:
        """Extend every held lease by `lease_seconds` from now (the database's clock); returns the txnIds another
        coordinator took over since (no longer held: this coordinator must not drive them)."""
        held = dict(self._held)
        if not held:
            return []
        ids, epochs = list(held), [held[t] for t in held]

        async def extend(conn: AsyncConnection[Row]) -> list[Row]:
            found = await conn.execute(
                f"UPDATE txn_lease l SET lease_until = {_LEASED} FROM unnest(%s::text[], %s::bigint[]) AS h(t, e)"
                " WHERE l.txn_id = h.t AND l.epoch = h.e AND l.owner = %s RETURNING l.txn_id",
                (self.lease_seconds, ids, epochs, self.owner),
            )
            return await found.fetchall()

        kept = {str(r[0]) for r in await run_async(self._pool, extend, idempotent=False)}
        lost = [t for t in ids if t not in kept]
        for t in lost:
            if self._held.get(t) == held[t]:
                del self._held[t]
        return lost

    async def take_lapsed(self, limit: int, exclude: Sequence[str] = ()) -> list[Lease]:
        """HATP-STORE-6: take over up to `limit` unfinished transactions whose lease lapsed (oldest first), each at
        its epoch + 1, leased to this coordinator. Rows another coordinator is taking (or appending to) right now
        are skipped, not waited for. `exclude`: transactions this coordinator still drives (it renews those)."""
        if limit <= 0:
            return []

        async def take(conn: AsyncConnection[Row]) -> list[Row]:
            found = await conn.execute(
                f"UPDATE txn_lease l SET owner = %s, epoch = l.epoch + 1, lease_until = {_LEASED}"
                " FROM (SELECT x.txn_id FROM txn_lease x JOIN txn t ON t.txn_id = x.txn_id"
                " WHERE NOT t.closed AND (x.lease_until IS NULL OR x.lease_until < clock_timestamp())"
                " AND NOT (x.txn_id = ANY(%s)) ORDER BY t.begun LIMIT %s FOR UPDATE OF x SKIP LOCKED) s"
                " WHERE l.txn_id = s.txn_id RETURNING l.txn_id, l.epoch",
                (self.owner, self.lease_seconds, list(exclude), limit),
            )
            return await found.fetchall()

        rows = await run_async(self._pool, take, idempotent=False)
        taken = [Lease(str(r[0]), int(str(r[1]))) for r in rows]
        for lease in taken:
            self._held[lease.txn_id] = lease.epoch
        return taken

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

"""Connection pools to one PostgreSQL database, and the schema check run when a store opens (HATP-STORE-1).

Pools check a connection before lending it (`check_connection`), so after the server restarted (`pg_ctl restart`:
every connection dropped) a store reconnects on its next call instead of failing on a dead socket. While the server
is away a pool tries to connect again every RECONNECT_SECONDS or sooner, so a call waiting for it is served about
as soon as the server is back (psycopg_pool alone doubles its wait after each failed try: after an outage of D
seconds it would come back up to D seconds late). A call waits for a connection up to the pool's timeout, once: a
PoolTimeout is raised, never tried again (the server was away for the whole timeout). Every call runs
through `run` / `run_async`, tried at most ATTEMPTS times on a fresh connection when the connection is lost: work
that is one statement whose second run changes nothing (a read, an upsert of a whole row) runs on its own and is
simply run again; any other work is one transaction, run again only when the connection was lost before its commit
was sent (it kept nothing). A connection lost during the commit leaves the outcome unknown: that raises
psycopg.OperationalError, and what was written is committed whole or not at all, never reported durable when it
was not (HATP-STORE-2). A session the server ended because it sat idle inside its transaction (HATP-STORE-7)
kept nothing either, its commit included, and is tried again.
Migrations run under a transaction-scoped advisory lock, so several processes starting at once on one database
migrate it once.

A store refuses a server that acknowledges commits before they are on disk (`fsync` or `synchronous_commit` off,
HATP-STORE-3): HATP-TXN-4's forced writes would then be forced in name only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from psycopg import AsyncConnection, Connection, OperationalError
from psycopg.errors import IdleInTransactionSessionTimeout
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from hatp_mcp.errors import HatpError
from hatp_mcp.store.dsn import shown
from hatp_mcp.store.errors import StoreUnreachable
from hatp_mcp.store.schema import VERSION_TABLE, Schema

__all__ = [
    "ATTEMPTS",
    "CONNECT_TIMEOUT_SECONDS",
    "RECONNECT_SECONDS",
    "durability_refusal",
    "migrate",
    "migrate_async",
    "open_async_pool",
    "open_pool",
    "run",
    "run_async",
    "where",
]

T = TypeVar("T")
Row = tuple[object, ...]
# Tries of one call whose connection was lost (before its commit was sent). While the server is down a try waits
# in the pool for a connection (psycopg_pool reconnects with backoff, up to its timeout), so tries do not spin; a
# server shutting down may still lend connections it is about to end, and several tries can meet one of those.
ATTEMPTS = 10

CONNECT_TIMEOUT_SECONDS = 10
# How long one run of a pool's reconnection tries lasts before it starts over with a try at once: psycopg_pool
# pauses after a failed try and twice as long after each next one, so a short run keeps every pause short.
RECONNECT_SECONDS = 2.0
_MIGRATION_LOCK = 0x68617470  # "hatp": one advisory lock key for every component's migration
_CREATE_VERSIONS = f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
_READ = f"SELECT version FROM {VERSION_TABLE} WHERE component = %s"
_WRITE = (
    f"INSERT INTO {VERSION_TABLE} (component, version) VALUES (%s, %s)"
    " ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version"
)


def where(url: str) -> str:
    """The database a URL names, for messages: never its password."""
    return shown(url)


_DURABILITY = "SELECT current_setting('fsync'), current_setting('synchronous_commit')"


def durability_refusal(fsync: str, synchronous_commit: str, at: str) -> HatpError | None:
    """HATP-STORE-3: None when a commit is on disk before it is acknowledged, else the refusal."""
    off = [name for name, value in (("fsync", fsync), ("synchronous_commit", synchronous_commit)) if value == "off"]
    if not off:
        return None
    return HatpError(
        "HATP-STORE-3",
        f"{at} acknowledges commits before they are durable ({' and '.join(off)} off): a decision could be lost"
        " after its messages were sent",
        path=off[0],
        code="STORE_NOT_DURABLE",
        fix="turn fsync and synchronous_commit on for this server, database and role",
    )


def _check_durable(row: tuple[object, ...] | None, at: str) -> None:
    fsync, sync = (str(v) for v in row) if row else ("off", "off")
    refusal = durability_refusal(fsync, sync, at)
    if refusal is not None:
        raise refusal


def migrate(conn: Connection[tuple[object, ...]], schema: Schema, at: str) -> int:
    """Bring `schema` up to date in one transaction; returns the version found. Raises HatpError HATP-STORE-1
    (SCHEMA_TOO_NEW) when the database's is newer than this code's, leaving it untouched."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(_CREATE_VERSIONS)
        row = conn.execute(_READ, (schema.component,)).fetchone()
        found = int(str(row[0])) if row else 0
        for step in schema.pending(found, at):
            for statement in step:
                conn.execute(statement.encode())
        if found != schema.version:
            conn.execute(_WRITE, (schema.component, schema.version))
    return found


async def migrate_async(conn: AsyncConnection[tuple[object, ...]], schema: Schema, at: str) -> int:
    """`migrate` on an async connection."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await conn.execute(_CREATE_VERSIONS)
        row = await (await conn.execute(_READ, (schema.component,))).fetchone()
        found = int(str(row[0])) if row else 0
        for step in schema.pending(found, at):
            for statement in step:
                await conn.execute(statement.encode())
        if found != schema.version:
            await conn.execute(_WRITE, (schema.component, schema.version))
    return found


def _unreachable(url: str, exc: Exception) -> StoreUnreachable:
    return StoreUnreachable(
        f"{where(url)}: no connection within {CONNECT_TIMEOUT_SECONDS} s ({exc}): is the server running"
        " and does the URL name it, its database and a role that may connect?"
    )


def _start_over(pool: ConnectionPool[Any]) -> None:
    """psycopg_pool gave a reconnection up after `reconnect_timeout` (RECONNECT_SECONDS): start a new one, its first
    try at once (`check` grows a pool that lost its connections), so tries never grow rarer while the server is
    away."""
    if not pool.closed:
        pool.check()


async def _start_over_async(pool: AsyncConnectionPool[Any]) -> None:
    """`_start_over` for asyncio."""
    if not pool.closed:
        await pool.check()


def open_pool(url: str, schema: Schema, *, max_size: int = 4) -> ConnectionPool[Connection[tuple[object, ...]]]:
    """An open pool on `url` with `schema` migrated. Raises StoreUnreachable (no connection within
    CONNECT_TIMEOUT_SECONDS), HatpError HATP-STORE-1 (a newer schema) or HATP-STORE-3 (commits not durable)."""
    try:
        with Connection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
            _check_durable(conn.execute(_DURABILITY).fetchone(), where(url))
            migrate(conn, schema, where(url))
    except OperationalError as exc:
        raise _unreachable(url, exc) from exc
    pool: ConnectionPool[Connection[tuple[object, ...]]] = ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        check=ConnectionPool.check_connection,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS},
        name=f"hatp-{schema.component}",
        reconnect_timeout=RECONNECT_SECONDS,
        reconnect_failed=_start_over,
    )
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
    except PoolTimeout as exc:
        pool.close()
        raise _unreachable(url, exc) from exc
    return pool


async def open_async_pool(
    url: str, schema: Schema, *, max_size: int = 4, options: str | None = None
) -> AsyncConnectionPool[AsyncConnection[tuple[object, ...]]]:
    """`open_pool` for asyncio. `options`: libpq `options` for every pooled session (e.g. `-c name=value`)."""
    try:
        async with await AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
            _check_durable(await (await conn.execute(_DURABILITY)).fetchone(), where(url))
            await migrate_async(conn, schema, where(url))
    except OperationalError as exc:
        raise _unreachable(url, exc) from exc
    pool: AsyncConnectionPool[AsyncConnection[tuple[object, ...]]] = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        check=AsyncConnectionPool.check_connection,
        kwargs={
            "autocommit": True,
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            **({"options": options} if options else {}),
        },
        name=f"hatp-{schema.component}",
        reconnect_timeout=RECONNECT_SECONDS,
        reconnect_failed=_start_over_async,
    )
    try:
        await pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS)
    except PoolTimeout as exc:
        await pool.close()
        raise _unreachable(url, exc) from exc
    return pool


def run(pool: ConnectionPool[Connection[Row]], work: Callable[[Connection[Row]], T], *, idempotent: bool) -> T:
    """`work` on a pooled connection: on its own when `idempotent` (one statement that may run twice harmlessly),
    else inside one transaction. Raises psycopg.OperationalError when the connection was lost during the commit
    (outcome unknown) or on every try, psycopg_pool.PoolTimeout when no connection came back within the pool's
    timeout (at once: the server was away that long, and another wait would only keep the caller waiting), and whatever
    `work` raises (then nothing of it is kept). `work` may run more than once: it must only read and write through
    the connection it is given."""
    for attempt in range(1, ATTEMPTS + 1):
        committing = False
        try:
            with pool.connection() as conn:
                if idempotent:
                    return work(conn)
                with conn.transaction():
                    result = work(conn)
                    committing = True  # from here on a lost connection may have committed
                return result
        except PoolTimeout:
            raise  # no connection for the pool's whole timeout: a PoolTimeout is an OperationalError, not a lost one
        except OperationalError:
            if committing or attempt == ATTEMPTS:
                raise
            pool.check()  # drop every idle connection the server already ended before the next try
    raise AssertionError("unreachable: the last attempt returns or raises")


async def run_async(
    pool: AsyncConnectionPool[AsyncConnection[Row]],
    work: Callable[[AsyncConnection[Row]], Awaitable[T]],
    *,
    idempotent: bool,
) -> T:
    """`run` for asyncio."""
    for attempt in range(1, ATTEMPTS + 1):
        committing = False
        try:
            async with pool.connection() as conn:
                if idempotent:
                    return await work(conn)
                async with conn.transaction():
                    result = await work(conn)
                    committing = True
                return result
        except PoolTimeout:
            raise
        except IdleInTransactionSessionTimeout:
            # the server ended the session while it sat idle inside the transaction (HATP-STORE-7; the process was
            # paused or starved): it was waiting for this client, so nothing was committed, a COMMIT included
            if attempt == ATTEMPTS:
                raise
            await pool.check()
        except OperationalError:
            if committing or attempt == ATTEMPTS:
                raise
            await pool.check()
    raise AssertionError("unreachable: the last attempt returns or raises")

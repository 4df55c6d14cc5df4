"""Where a server's durable state lives, named by one URL: `sqlite:PATH` (the embedded default) or
`postgresql://USER@HOST:PORT/DB` (libpq's URL, `postgres://` too), and opening each store on it.

PostgreSQL's modules (and psycopg) are imported only when a postgresql URL is opened, so a SQLite install needs
none of it. Raises ValueError for a URL that names neither, with what to write instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hatp_mcp.store.deliveries import DELIVERIES_DB, DeliveryStore
from hatp_mcp.store.dsn import shown
from hatp_mcp.store.gateway_store import SqliteGatewayStore
from hatp_mcp.store.journal_store import SqliteJournalStore
from hatp_mcp.store.participant_state import SqliteParticipantStore
from hatp_mcp.store.replay_cache import SqliteReplayCache
from hatp_mcp.store.txn_bindings import SqliteTxnBindings
from hatp_mcp.store.txn_log import SqliteTxnLog

if TYPE_CHECKING:
    from hatp_mcp.store.postgresql.deliveries import PostgresDeliveryQueue
    from hatp_mcp.store.postgresql.gateway_store import PostgresGatewayStore
    from hatp_mcp.store.postgresql.journal_store import PostgresJournalStore
    from hatp_mcp.store.postgresql.participant_state import PostgresParticipantStore
    from hatp_mcp.store.postgresql.replay_cache import PostgresReplayCache
    from hatp_mcp.store.postgresql.txn_bindings import PostgresTxnBindings
    from hatp_mcp.store.postgresql.txn_log import PostgresTxnLog

__all__ = [
    "StoreUrl",
    "open_delivery_queue",
    "open_gateway_store",
    "open_journal_store",
    "open_participant_store",
    "open_replay_cache",
    "open_txn_bindings",
    "open_txn_log",
]

_POSTGRES = ("postgresql://", "postgres://")
_NEEDS_PSYCOPG = "a postgresql:// store needs psycopg: pip install 'hatp-mcp[postgresql]'"


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """`backend` is "sqlite" (then `target` is the database file) or "postgresql" (then the libpq URL)."""

    backend: str
    target: str

    @classmethod
    def parse(cls, text: str) -> StoreUrl:
        if text.startswith(_POSTGRES):
            return cls("postgresql", text)
        if text.startswith("sqlite:"):
            path = text.removeprefix("sqlite:")
            if path.startswith("//"):  # sqlite:///abs/path, as SQLAlchemy spells it
                path = path[2:]
            if path:
                return cls("sqlite", path)
        raise ValueError(
            f"--store {text!r}: give sqlite:PATH (a database file, the default under --data) or "
            "postgresql://USER@HOST:PORT/DATABASE"
        )

    @classmethod
    def sqlite(cls, path: Path) -> StoreUrl:
        return cls("sqlite", str(path))

    def __str__(self) -> str:
        """For logs: a postgresql URL without its password."""
        return f"sqlite:{self.target}" if self.backend == "sqlite" else shown(self.target)


def _psycopg() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ValueError(_NEEDS_PSYCOPG) from exc


@asynccontextmanager
async def open_txn_log(
    url: StoreUrl, *, owner: str | None = None, lease_seconds: float = 30.0
) -> AsyncIterator[SqliteTxnLog | PostgresTxnLog]:
    """The coordinator's decision log, closed on exit. On PostgreSQL, shared by coordinators: `owner` (default host
    and pid) owns the transactions it begins or takes over under leases of `lease_seconds` (HATP-STORE-4).
    Raises ValueError (no psycopg), OSError / sqlite3.Error
    (SQLite), StoreUnreachable (an OSError: PostgreSQL did not answer), HatpError HATP-STORE-1 (a newer schema)
    or HATP-STORE-3 (a server that acknowledges commits before they are durable)."""
    if url.backend == "sqlite":
        log = SqliteTxnLog(url.target)
        try:
            yield log
        finally:
            log.close()
        return
    _psycopg()
    from hatp_mcp.store.postgresql.txn_log import PostgresTxnLog

    pg = await PostgresTxnLog.open(url.target, owner, lease_seconds)
    try:
        yield pg
    finally:
        await pg.aclose()


def open_participant_store(url: StoreUrl) -> SqliteParticipantStore | PostgresParticipantStore:
    """A participant's branch state (`close()` it). Raises as `open_txn_log`."""
    if url.backend == "sqlite":
        return SqliteParticipantStore(url.target)
    _psycopg()
    from hatp_mcp.store.postgresql.participant_state import PostgresParticipantStore

    return PostgresParticipantStore(url.target)


def open_gateway_store(url: StoreUrl) -> SqliteGatewayStore | PostgresGatewayStore:
    """The gateway's asks, proofs, contacts and outbox (`close()` it). Raises as `open_txn_log`."""
    if url.backend == "sqlite":
        return SqliteGatewayStore(url.target)
    _psycopg()
    from hatp_mcp.store.postgresql.gateway_store import PostgresGatewayStore

    return PostgresGatewayStore(url.target)


def open_delivery_queue(url: StoreUrl) -> DeliveryStore | PostgresDeliveryQueue:
    """The gateway's delivery queue beside its asks (`close()` it): on SQLite `deliveries.db` in the gateway
    database's folder (the gateway processes of one machine share it), on PostgreSQL the same database (gateways on
    any machine share it: HATP-GW-78). Raises as `open_txn_log`."""
    if url.backend == "sqlite":
        return DeliveryStore(Path(url.target).parent / DELIVERIES_DB)
    _psycopg()
    from hatp_mcp.store.postgresql.deliveries import PostgresDeliveryQueue

    return PostgresDeliveryQueue(url.target)


def open_replay_cache(url: StoreUrl) -> SqliteReplayCache | PostgresReplayCache:
    """A gate's used nonces and tool definition epochs (`close()` it). Raises as `open_txn_log`."""
    if url.backend == "sqlite":
        return SqliteReplayCache(url.target)
    _psycopg()
    from hatp_mcp.store.postgresql.replay_cache import PostgresReplayCache

    return PostgresReplayCache(url.target)


def open_txn_bindings(url: StoreUrl) -> SqliteTxnBindings | PostgresTxnBindings:
    """A receiver's txnId -> coordinator bindings (HATP-TRUST-5; `close()` it). Raises as `open_txn_log`."""
    if url.backend == "sqlite":
        return SqliteTxnBindings(url.target)
    _psycopg()
    from hatp_mcp.store.postgresql.txn_bindings import PostgresTxnBindings

    return PostgresTxnBindings(url.target)


@asynccontextmanager
async def open_journal_store(
    url: StoreUrl, *, on_durable: Callable[[int], None] | None = None
) -> AsyncIterator[SqliteJournalStore | PostgresJournalStore]:
    """The journal's sagas and dead letters (hatp_mcp.store.journal_store), closed on exit; on PostgreSQL shared
    by journal processes. `on_durable(n)` runs after each durable batch. Raises as `open_txn_log`."""
    if url.backend == "sqlite":
        store = SqliteJournalStore(url.target, on_durable=on_durable)
        try:
            yield store
        finally:
            store.close()
        return
    _psycopg()
    from hatp_mcp.store.postgresql.journal_store import PostgresJournalStore

    pg = await PostgresJournalStore.open(url.target, on_durable=on_durable)
    try:
        yield pg
    finally:
        await pg.aclose()

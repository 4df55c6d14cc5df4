"""The txnId -> coordinator bindings a receiver keeps, on PostgreSQL: the `TxnBindings` of
hatp_mcp.store.txn_bindings (HATP-TRUST-5). A binding is inserted only when its txnId has none (``ON CONFLICT DO
NOTHING``), then the one that holds is read back: of two processes binding one txnId at once, both read the first.
The highest coordinator epoch per txnId (HATP-TRUST-9) is raised with ``GREATEST`` in one upsert, written only when
it rises (a txnId with no row is at epoch 0).
"""

from __future__ import annotations

from psycopg import Connection
from psycopg_pool import ConnectionPool

from hatp_mcp.core.participant.coordinator_auth import Binding
from hatp_mcp.store.postgresql.pools import open_pool, run
from hatp_mcp.store.schema import Schema

__all__ = ["SCHEMA", "PostgresTxnBindings"]

SCHEMA = Schema(
    "coordinator.bindings",
    (
        ("CREATE TABLE txn_bindings (txn_id TEXT PRIMARY KEY, coordinator TEXT NOT NULL, plan_digest TEXT NOT NULL)",),
        ("CREATE TABLE txn_epochs (txn_id TEXT PRIMARY KEY, epoch BIGINT NOT NULL)",),
    ),
)

Row = tuple[object, ...]
_READ = "SELECT coordinator, plan_digest FROM txn_bindings WHERE txn_id = %s"


class PostgresTxnBindings:
    """Raises StoreUnreachable / psycopg errors like every PostgreSQL store; `close()` it."""

    def __init__(self, url: str) -> None:
        self._pool: ConnectionPool[Connection[Row]] = open_pool(url, SCHEMA)

    def close(self) -> None:
        self._pool.close()

    def settle(self, txn_id: str) -> None:
        """Nothing waits: `bind` and `advance` commit before they return."""
        return None

    def get(self, txn_id: str) -> Binding | None:
        row = run(self._pool, lambda conn: conn.execute(_READ, (txn_id,)).fetchone(), idempotent=True)
        return Binding(txn_id, str(row[0]), str(row[1])) if row is not None else None

    def bind(self, binding: Binding) -> Binding:
        def keep(conn: Connection[Row]) -> Row | None:
            conn.execute(
                "INSERT INTO txn_bindings (txn_id, coordinator, plan_digest) VALUES (%s, %s, %s)"
                " ON CONFLICT (txn_id) DO NOTHING",
                (binding.txn_id, binding.coordinator, binding.plan_digest),
            )
            # a statement of its own: it sees a binding another process committed while the insert waited
            return conn.execute(_READ, (binding.txn_id,)).fetchone()

        row = run(self._pool, keep, idempotent=True)  # running it again binds nothing new and reads the same
        if row is None:  # bindings are never removed: the row inserted or found is there
            raise RuntimeError(f"txn_bindings lost its row for {binding.txn_id}")
        return Binding(binding.txn_id, str(row[0]), str(row[1]))

    def advance(self, txn_id: str, epoch: int) -> int:
        def raise_to(conn: Connection[Row]) -> Row | None:
            kept = conn.execute("SELECT epoch FROM txn_epochs WHERE txn_id = %s", (txn_id,)).fetchone()
            highest = int(str(kept[0])) if kept is not None else 0  # no row: nothing above epoch 0 was admitted
            if epoch <= highest:  # nothing to raise, so nothing to write
                return (highest,)
            return conn.execute(
                "INSERT INTO txn_epochs (txn_id, epoch) VALUES (%s, %s) ON CONFLICT (txn_id)"
                " DO UPDATE SET epoch = GREATEST(txn_epochs.epoch, EXCLUDED.epoch) RETURNING epoch",
                (txn_id, epoch),
            ).fetchone()

        row = run(self._pool, raise_to, idempotent=True)  # raising to the same epoch again changes nothing
        if row is None:
            raise RuntimeError(f"txn_epochs returned no row for {txn_id}")
        return int(str(row[0]))

"""Which coordinator and plan a receiver keeps each transaction with (spec/mcp-binding.md HATP-TRUST-5).

One row per txnId, written once by the first request a trusted coordinator proved, never changed or removed:
`bind` inserts only when the txnId is new and answers the binding that holds, in one step, so two coordinators
racing for one txnId cannot both win. `SqliteTxnBindings` keeps them in `DIR/coordinators.db` (a receiver's
--data), hatp_mcp.store.postgresql.txn_bindings in PostgreSQL; `MemoryTxnBindings` for in-memory servers and
tests. Beside each binding, the highest coordinator epoch the receiver has admitted for the txnId (HATP-TRUST-9,
fencing): `advance` raises it, never lowers it, in one step; a txnId with no epoch row is at epoch 0, so a request
that raises nothing (the usual case: the same coordinator, the same epoch) writes nothing. No protocol logic: the
checks are hatp_mcp/core/participant/coordinator_auth.py's.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol

from hatp_mcp.core.participant.coordinator_auth import Binding
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import open_db

__all__ = ["SQLITE_SCHEMA", "MemoryTxnBindings", "SqliteTxnBindings", "TxnBindings"]

SQLITE_SCHEMA = Schema(
    "coordinator.bindings",
    (
        (
            "CREATE TABLE IF NOT EXISTS txn_bindings ("
            "txn_id TEXT PRIMARY KEY, coordinator TEXT NOT NULL, plan_digest TEXT NOT NULL)",
        ),
        ("CREATE TABLE IF NOT EXISTS txn_epochs (txn_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",),
    ),
)


class TxnBindings(Protocol):
    def get(self, txn_id: str) -> Binding | None: ...

    def bind(self, binding: Binding) -> Binding:
        """Keep `binding` if its txnId has none; return the binding that holds (the first one)."""
        ...

    def advance(self, txn_id: str, epoch: int) -> int:
        """Durably raise `txn_id`'s highest epoch to `epoch` if it is lower; return the highest (after)."""
        ...


class MemoryTxnBindings:
    def __init__(self) -> None:
        self._rows: dict[str, Binding] = {}
        self._epochs: dict[str, int] = {}

    def get(self, txn_id: str) -> Binding | None:
        return self._rows.get(txn_id)

    def bind(self, binding: Binding) -> Binding:
        return self._rows.setdefault(binding.txn_id, binding)

    def advance(self, txn_id: str, epoch: int) -> int:
        highest = max(self._epochs.get(txn_id, 0), epoch)
        self._epochs[txn_id] = highest
        return highest


class SqliteTxnBindings:
    """Durable (WAL, synchronous=FULL, as every store here): a binding survives a restart."""

    def __init__(self, path: str | Path) -> None:
        self._conn = open_db(path)
        self._lock = threading.Lock()
        with self._lock:
            migrate_sqlite(self._conn, SQLITE_SCHEMA, str(path))

    def get(self, txn_id: str) -> Binding | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT coordinator, plan_digest FROM txn_bindings WHERE txn_id = ?", (txn_id,)
            ).fetchone()
        return Binding(txn_id, row[0], row[1]) if row is not None else None

    def bind(self, binding: Binding) -> Binding:
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO txn_bindings (txn_id, coordinator, plan_digest) VALUES (?, ?, ?)",
                (binding.txn_id, binding.coordinator, binding.plan_digest),
            )
            row = self._conn.execute(
                "SELECT coordinator, plan_digest FROM txn_bindings WHERE txn_id = ?", (binding.txn_id,)
            ).fetchone()
        return Binding(binding.txn_id, row[0], row[1])

    def advance(self, txn_id: str, epoch: int) -> int:
        with self._lock:
            kept = self._conn.execute("SELECT epoch FROM txn_epochs WHERE txn_id = ?", (txn_id,)).fetchone()
            highest = int(kept[0]) if kept is not None else 0  # no row: nothing above epoch 0 was admitted
            if epoch <= highest:  # nothing to raise, so nothing to write (a durable write costs a sync)
                return highest
            row = self._conn.execute(
                "INSERT INTO txn_epochs (txn_id, epoch) VALUES (?, ?) ON CONFLICT (txn_id)"
                " DO UPDATE SET epoch = MAX(epoch, excluded.epoch) RETURNING epoch",
                (txn_id, epoch),
            ).fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

"""Which coordinator and plan a receiver keeps each transaction with (spec/mcp-binding.md HATP-TRUST-5).

One row per txnId, written once by the first request a trusted coordinator proved, never changed or removed:
`bind` inserts only when the txnId is new and answers the binding that holds, in one step, so two coordinators
racing for one txnId cannot both win. Beside each binding, the highest coordinator epoch the receiver has admitted
for the txnId (HATP-TRUST-9, fencing): `advance` raises it, never lowers it, in one step; a txnId with no epoch row
is at epoch 0, so a request that raises nothing (the usual case: the same coordinator, the same epoch) writes
nothing.

Where they are kept: `SqliteTxnBindings` on a file of their own (the gateway's `DATA/coordinators.db`) writes each
binding durably when it is made. On a participant's own database (a `StateDb`, `state.db`) with `defer=True` a
binding or a raised epoch is held in memory (so every later request sees it at once) and written by the first
transaction that keeps state for its txnId (`SqliteParticipantStore.put`), or alone by `settle` before the request
that made it is answered: no sync of its own (HATP-TRUST-5). hatp_mcp.store.postgresql.txn_bindings in PostgreSQL;
`MemoryTxnBindings` for in-memory servers and tests. No protocol logic: the checks are
hatp_mcp/core/participant/coordinator_auth.py's.
"""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Protocol

from hatp_mcp.core.participant.coordinator_auth import Binding, check_binding
from hatp_mcp.store.participant_state import BINDING_TABLES, StateDb
from hatp_mcp.store.schema import Schema, migrate_sqlite

__all__ = ["SQLITE_SCHEMA", "MemoryTxnBindings", "SqliteTxnBindings", "TxnBindings"]

SQLITE_SCHEMA = Schema("coordinator.bindings", ((BINDING_TABLES[0],), (BINDING_TABLES[1],)))
_READ = "SELECT coordinator, plan_digest FROM txn_bindings WHERE txn_id = ?"
_INSERT = "INSERT OR IGNORE INTO txn_bindings (txn_id, coordinator, plan_digest) VALUES (?, ?, ?)"
_EPOCH = "SELECT epoch FROM txn_epochs WHERE txn_id = ?"
_RAISE = (
    "INSERT INTO txn_epochs (txn_id, epoch) VALUES (?, ?) ON CONFLICT (txn_id)"
    " DO UPDATE SET epoch = MAX(epoch, excluded.epoch) RETURNING epoch"
)


class TxnBindings(Protocol):
    def get(self, txn_id: str) -> Binding | None: ...

    def bind(self, binding: Binding) -> Binding:
        """Keep `binding` if its txnId has none; return the binding that holds (the first one)."""
        ...

    def advance(self, txn_id: str, epoch: int) -> int:
        """Raise `txn_id`'s highest epoch to `epoch` if it is lower; return the highest (after)."""
        ...

    def settle(self, txn_id: str) -> None:
        """Make the binding and epoch of `txn_id` durable now if they are not yet (before a request is answered)."""
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

    def settle(self, txn_id: str) -> None:
        return None


class SqliteTxnBindings:
    """Durable (WAL, synchronous=FULL, as every store here): a binding survives a restart.

    `where`: a file of their own, or a participant's `StateDb`. `defer` (a StateDb only): a binding or raised epoch
    is written with the txnId's next state (`SqliteParticipantStore.put`) or by `settle`, whichever comes first;
    the caller settles before it answers the request that made it. A deferred write that finds the txnId bound to
    another coordinator or plan (another process on the same file won the race) raises HatpError HATP-TRUST-5
    (TXN_BOUND), rolling back the transaction that carried it."""

    def __init__(self, where: str | Path | StateDb, *, defer: bool = False) -> None:
        if defer and not isinstance(where, StateDb):
            raise ValueError("deferred bindings are written with a participant's state: pass its StateDb")
        self._own = not isinstance(where, StateDb)
        self._db = where if isinstance(where, StateDb) else StateDb(where)
        self._defer = defer
        self._bound: dict[str, Binding] = {}  # made, not yet durable (deferred)
        self._raised: dict[str, int] = {}  # raised, not yet durable (deferred)
        with self._db.lock:
            migrate_sqlite(self._db.conn, SQLITE_SCHEMA, self._db.where)

    def get(self, txn_id: str) -> Binding | None:
        with self._db.lock:
            made = self._bound.get(txn_id)
            if made is not None:
                return made
            row = self._db.conn.execute(_READ, (txn_id,)).fetchone()
        return Binding(txn_id, row[0], row[1]) if row is not None else None

    def bind(self, binding: Binding) -> Binding:
        with self._db.lock:
            held = self.get(binding.txn_id)
            if held is not None:
                return held
            if not self._defer:
                self._db.write(_INSERT, (binding.txn_id, binding.coordinator, binding.plan_digest))
                row = self._db.conn.execute(_READ, (binding.txn_id,)).fetchone()
                return Binding(binding.txn_id, row[0], row[1])
            self._bound[binding.txn_id] = binding
            self._db.defer(
                binding.txn_id,
                functools.partial(_insert, binding),
                functools.partial(self._forget, binding.txn_id),
            )
            return binding

    def advance(self, txn_id: str, epoch: int) -> int:
        with self._db.lock:
            highest = self._highest(txn_id)
            if epoch <= highest:  # nothing to raise, so nothing to write (a durable write costs a sync)
                return highest
            if not self._defer:
                row = self._db.conn.execute(_RAISE, (txn_id, epoch)).fetchone()
                return int(row[0])
            self._raised[txn_id] = epoch
            self._db.defer(
                txn_id, functools.partial(_raise, txn_id, epoch), functools.partial(self._kept, txn_id, epoch)
            )
            return epoch

    def _highest(self, txn_id: str) -> int:
        raised = self._raised.get(txn_id)
        if raised is not None:  # higher than the durable one (it was raised from there)
            return raised
        kept = self._db.conn.execute(_EPOCH, (txn_id,)).fetchone()
        return int(kept[0]) if kept is not None else 0  # no row: nothing above epoch 0 was admitted

    def _forget(self, txn_id: str) -> None:
        self._bound.pop(txn_id, None)  # durable now: read from the table from here on

    def _kept(self, txn_id: str, epoch: int) -> None:
        if self._raised.get(txn_id) == epoch:  # a later, higher raise waits in its own deferred write
            del self._raised[txn_id]

    def settle(self, txn_id: str) -> None:
        if self._defer:
            self._db.settle(txn_id)

    def close(self) -> None:
        if self._own:
            with self._db.lock:
                self._db.close()


def _insert(binding: Binding, conn: sqlite3.Connection) -> None:
    """The deferred binding, inside the transaction that carries it (insert-if-absent, then the one that holds)."""
    conn.execute(_INSERT, (binding.txn_id, binding.coordinator, binding.plan_digest))
    row = conn.execute(_READ, (binding.txn_id,)).fetchone()
    check_binding(binding, Binding(binding.txn_id, row[0], row[1]))


def _raise(txn_id: str, epoch: int, conn: sqlite3.Connection) -> None:
    conn.execute(_RAISE, (txn_id, epoch)).fetchone()

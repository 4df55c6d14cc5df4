"""A participant's durable branch state: one row per (txnId, branchId) with its first answers per phase.

`MemoryParticipantStore` for tests and demos, `SqliteParticipantStore` (via hatp_mcp.store.sqlite.open_db) when
the state must survive the process. Calls are synchronous and short (one row); this module holds no protocol
logic: it stores what hatp_mcp.runtime.participant.driver decides.

`StateDb` is the one SQLite database a store keeps its rows in; a tool whose own data lives in the same database
(servers/_inventory.py) shares it, so that an effect and the answer that reports it can be kept by one durable
transaction (`SqliteParticipantStore.transaction`, HATP-PART-13). The receiver's txnId bindings live there too
(hatp_mcp/store/txn_bindings.py, HATP-TRUST-5): a binding made by a request is a *deferred* write that the first
put of that txnId carries in its own transaction (`StateDb.defer` / `carry`), or that is written alone before the
request is answered (`StateDb.settle`), so binding a transaction costs no durable write of its own.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.participant.branch import BranchMachine, BranchState, Lease
from hatp_mcp.errors import BrokenInvariant
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import json_text, open_db

__all__ = [
    "BINDING_TABLES",
    "SQLITE_SCHEMA",
    "BranchRow",
    "MemoryParticipantStore",
    "ParticipantStore",
    "SqliteParticipantStore",
    "StateDb",
]


@dataclass
class BranchRow:
    txn_id: str
    branch_id: str
    plan_digest: str
    state: str = BranchState.NONE.value
    branch: dict[str, Any] | None = None
    lease: Lease | None = None
    preconditions: dict[str, Any] | None = None
    committed_at: str | None = None
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def copy(self) -> BranchRow:
        """A copy whose answers can change independently (the answers themselves are never changed).

        Every field is copied, also ones added later (copy.copy, cheaper than dataclasses.replace)."""
        twin = copy.copy(self)
        twin.answers = dict(self.answers)
        return twin

    @property
    def machine(self) -> BranchMachine:
        return BranchMachine(BranchState(self.state))

    @machine.setter
    def machine(self, value: BranchMachine) -> None:
        self.state = value.state.value

    def to_json(self) -> str:
        lease = (
            {"expiresAt": format_ts(self.lease.expires_at), "horizon": format_ts(self.lease.horizon)}
            if self.lease
            else None
        )
        obj = {
            "planDigest": self.plan_digest,
            "state": self.state,
            "branch": self.branch,
            "lease": lease,
            "preconditions": self.preconditions,
            "committedAt": self.committed_at,
            "answers": self.answers,
        }
        return json_text(obj)  # orjson, exact fallback for an integer beyond 64 bits (in a branch's args)

    @classmethod
    def from_json(cls, txn_id: str, branch_id: str, text: str) -> BranchRow:
        d = json.loads(text)  # not orjson.loads: it reads an integer beyond 64 bits as a float
        lease = d.get("lease")
        return cls(
            txn_id,
            branch_id,
            d["planDigest"],
            d["state"],
            d.get("branch"),
            Lease(parse_ts(lease["expiresAt"]), parse_ts(lease["horizon"])) if lease else None,
            d.get("preconditions"),
            d.get("committedAt"),
            d.get("answers", {}),
        )


class ParticipantStore(Protocol):
    def get(self, txn_id: str, branch_id: str) -> BranchRow | None: ...

    def put(self, row: BranchRow) -> None: ...

    def branches(self, txn_id: str) -> list[BranchRow]:
        """Every branch row of one transaction, by branchId (what `hatp evidence` exports, HATP-REC-21)."""
        ...

    def get_lock(self, resource: str) -> dict[str, object] | None:
        """A lock's state (`LockTable.export`), so fencing tokens keep growing across restarts."""
        ...

    def put_lock(self, resource: str, state: dict[str, object]) -> None: ...


class MemoryParticipantStore:
    """Not durable: rows are kept as copies (answers are signed objects, never changed after they are made)."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], BranchRow] = {}
        self._locks: dict[str, dict[str, object]] = {}

    def get(self, txn_id: str, branch_id: str) -> BranchRow | None:
        row = self._rows.get((txn_id, branch_id))
        return row.copy() if row is not None else None

    def put(self, row: BranchRow) -> None:
        self._rows[(row.txn_id, row.branch_id)] = row.copy()

    def branches(self, txn_id: str) -> list[BranchRow]:
        return [self._rows[k].copy() for k in sorted(self._rows) if k[0] == txn_id]

    def get_lock(self, resource: str) -> dict[str, object] | None:
        found = self._locks.get(resource)
        return dict(found) if found is not None else None

    def put_lock(self, resource: str, state: dict[str, object]) -> None:
        self._locks[resource] = dict(state)


# The txnId bindings and epochs (HATP-TRUST-5, -9), in the participant's own database since schema version 2: its
# step 2 makes code that kept them in DATA/coordinators.db refuse this file (HATP-STORE-1) instead of running on
# an empty coordinators.db. hatp_mcp/store/txn_bindings.py runs the same statements (its own component).
BINDING_TABLES = (
    "CREATE TABLE IF NOT EXISTS txn_bindings ("
    "txn_id TEXT PRIMARY KEY, coordinator TEXT NOT NULL, plan_digest TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS txn_epochs (txn_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
)

SQLITE_SCHEMA = Schema(
    "participant.state",
    (
        (
            "CREATE TABLE IF NOT EXISTS branch_state (txn_id TEXT, branch_id TEXT, row TEXT NOT NULL,"
            " PRIMARY KEY (txn_id, branch_id))",
            "CREATE TABLE IF NOT EXISTS lock_state (resource TEXT PRIMARY KEY, state TEXT NOT NULL)",
        ),
        BINDING_TABLES,
    ),
)

Write = Callable[[sqlite3.Connection], None]


@dataclass(slots=True)
class _Deferred:
    """A write kept back until a transaction carries it: `write` runs inside it, `kept` once it committed."""

    write: Write
    kept: Callable[[], None]


class StateDb:
    """One SQLite database (WAL, synchronous=FULL) shared by a participant store and the tool data living in it.

    Every use of `conn` holds `lock` (re-entrant, so a writer inside `transaction()` on the same thread joins it).
    `write` is one statement: its own durable transaction, or part of the open one. `transaction()` is BEGIN
    IMMEDIATE ... COMMIT (ROLLBACK when anything inside raises); a `transaction()` inside one joins it. Code inside
    a transaction must not await: the lock is a thread's, and another task on the event loop would join it.

    Deferred writes, by key (a txnId): `defer(key, write, kept)` keeps `write` back; the next transaction that
    `carry(key)`s runs it inside itself, and `kept()` is called once that transaction committed (rolled back, the
    write stays deferred); `settle(key)` writes whatever is still deferred for `key` in a transaction of its own.
    So a deferred write is durable no later than the first transaction that carries its key, and before `settle`
    returns; a process that dies first loses it along with everything that transaction held.
    """

    def __init__(self, path: str | Path) -> None:
        self.where = str(path)
        self.conn = open_db(path)
        self.lock = threading.RLock()
        self._depth = 0  # > 0 while a transaction is open (only ever changed under `lock`)
        self._deferred: dict[str, list[_Deferred]] = {}
        self._carried: list[tuple[str, _Deferred]] = []  # run inside the open transaction, kept at its COMMIT

    def defer(self, key: str, write: Write, kept: Callable[[], None]) -> None:
        with self.lock:
            self._deferred.setdefault(key, []).append(_Deferred(write, kept))

    def deferred(self, key: str) -> bool:
        """Whether a write for `key` waits to be carried or settled."""
        return key in self._deferred

    def carry(self, key: str) -> None:
        """Inside `transaction()`: run the writes deferred for `key` in it."""
        with self.lock:
            if not self._depth:
                raise BrokenInvariant("carry() runs inside transaction()")
            entries = self._deferred.pop(key, [])
            self._carried.extend((key, entry) for entry in entries)  # a write that raises rolls all of them back
            for entry in entries:
                entry.write(self.conn)

    def settle(self, key: str) -> None:
        """Make what is deferred for `key` durable now, in a transaction of its own (nothing deferred: no write)."""
        with self.lock:
            if key in self._deferred:
                with self.transaction():
                    self.carry(key)

    def write(self, sql: str, args: tuple[object, ...]) -> None:
        with self.lock:
            self.conn.execute(sql, args)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            if self._depth:  # joins the open transaction: its outermost owner commits or rolls back
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield self.conn
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                for key, entry in self._carried:  # rolled back: what it carried waits again
                    self._deferred.setdefault(key, []).append(entry)
                raise
            else:
                for _, entry in self._carried:
                    entry.kept()
            finally:
                self._depth = 0
                self._carried = []

    def close(self) -> None:
        self.conn.close()


_PUT = "INSERT OR REPLACE INTO branch_state (txn_id, branch_id, row) VALUES (?, ?, ?)"


class SqliteParticipantStore:
    """Each put is a durable transaction (WAL, synchronous=FULL): an answer is kept before it is sent.

    `path` or a `StateDb` shared with tool data (HATP-PART-13): a put inside `transaction()` is kept together with
    everything else written in it, by one fsync, or not at all."""

    def __init__(self, path: str | Path | StateDb) -> None:
        self.database = path if isinstance(path, StateDb) else StateDb(path)
        with self.database.lock:
            migrate_sqlite(self.database.conn, SQLITE_SCHEMA, self.database.where)

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """Everything written inside (puts, and writes of tool data on `database`) is one durable transaction."""
        return self.database.transaction()

    def get(self, txn_id: str, branch_id: str) -> BranchRow | None:
        with self.database.lock:
            cur = self.database.conn.execute(
                "SELECT row FROM branch_state WHERE txn_id = ? AND branch_id = ?", (txn_id, branch_id)
            )
            found = cur.fetchone()
        return BranchRow.from_json(txn_id, branch_id, found[0]) if found else None

    def put(self, row: BranchRow) -> None:
        """Durable when it returns (or with the open transaction), together with the writes deferred for the row's
        txnId (its binding, HATP-TRUST-5): one transaction, one sync."""
        args = (row.txn_id, row.branch_id, row.to_json())
        db = self.database
        with db.lock:
            if not db.deferred(row.txn_id):
                db.write(_PUT, args)
                return
            with db.transaction() as conn:
                db.carry(row.txn_id)
                conn.execute(_PUT, args)

    def branches(self, txn_id: str) -> list[BranchRow]:
        with self.database.lock:
            found = self.database.conn.execute(
                "SELECT branch_id, row FROM branch_state WHERE txn_id = ? ORDER BY branch_id", (txn_id,)
            ).fetchall()
        return [BranchRow.from_json(txn_id, branch_id, text) for branch_id, text in found]

    def get_lock(self, resource: str) -> dict[str, object] | None:
        with self.database.lock:
            found = self.database.conn.execute(
                "SELECT state FROM lock_state WHERE resource = ?", (resource,)
            ).fetchone()
        if found is None:
            return None
        d = json.loads(found[0])
        return {**d, "expiresAt": parse_ts(d["expiresAt"])}

    def put_lock(self, resource: str, state: dict[str, object]) -> None:
        expires = state["expiresAt"]
        text = json.dumps({**state, "expiresAt": format_ts(expires) if isinstance(expires, datetime) else expires})
        self.database.write("INSERT OR REPLACE INTO lock_state (resource, state) VALUES (?, ?)", (resource, text))

    def close(self) -> None:
        self.database.close()

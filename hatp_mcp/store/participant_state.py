"""A participant's durable branch state: one row per (txnId, branchId) with its first answers per phase.

`MemoryParticipantStore` for tests and demos, `SqliteParticipantStore` (via hatp_mcp.store.sqlite.open_db) when
the state must survive the process. Calls are synchronous and short (one row); this module holds no protocol
logic: it stores what hatp_mcp.runtime.participant decides.
"""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.participant import BranchMachine, BranchState, Lease
from hatp_mcp.store.sqlite import open_db

__all__ = ["BranchRow", "MemoryParticipantStore", "ParticipantStore", "SqliteParticipantStore"]


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
        return json.dumps(
            {
                "planDigest": self.plan_digest,
                "state": self.state,
                "branch": self.branch,
                "lease": lease,
                "preconditions": self.preconditions,
                "committedAt": self.committed_at,
                "answers": self.answers,
            }
        )

    @classmethod
    def from_json(cls, txn_id: str, branch_id: str, text: str) -> BranchRow:
        d = json.loads(text)
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

    def get_lock(self, resource: str) -> dict[str, object] | None:
        found = self._locks.get(resource)
        return dict(found) if found is not None else None

    def put_lock(self, resource: str, state: dict[str, object]) -> None:
        self._locks[resource] = dict(state)


class SqliteParticipantStore:
    """Each put is its own durable transaction (WAL, synchronous=FULL): an answer is kept before it is sent."""

    def __init__(self, path: str | Path) -> None:
        self._db = open_db(path)
        self._mutex = threading.Lock()
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS branch_state (txn_id TEXT, branch_id TEXT, row TEXT NOT NULL,"
            " PRIMARY KEY (txn_id, branch_id))"
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS lock_state (resource TEXT PRIMARY KEY, state TEXT NOT NULL)")

    def get(self, txn_id: str, branch_id: str) -> BranchRow | None:
        with self._mutex:
            cur = self._db.execute(
                "SELECT row FROM branch_state WHERE txn_id = ? AND branch_id = ?", (txn_id, branch_id)
            )
            found = cur.fetchone()
        return BranchRow.from_json(txn_id, branch_id, found[0]) if found else None

    def put(self, row: BranchRow) -> None:
        with self._mutex:
            self._db.execute(
                "INSERT OR REPLACE INTO branch_state (txn_id, branch_id, row) VALUES (?, ?, ?)",
                (row.txn_id, row.branch_id, row.to_json()),
            )

    def get_lock(self, resource: str) -> dict[str, object] | None:
        with self._mutex:
            found = self._db.execute("SELECT state FROM lock_state WHERE resource = ?", (resource,)).fetchone()
        if found is None:
            return None
        d = json.loads(found[0])
        return {**d, "expiresAt": parse_ts(d["expiresAt"])}

    def put_lock(self, resource: str, state: dict[str, object]) -> None:
        expires = state["expiresAt"]
        text = json.dumps({**state, "expiresAt": format_ts(expires) if isinstance(expires, datetime) else expires})
        with self._mutex:
            self._db.execute("INSERT OR REPLACE INTO lock_state (resource, state) VALUES (?, ?)", (resource, text))

    def close(self) -> None:
        self._db.close()

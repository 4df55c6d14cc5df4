"""A participant's branch state on PostgreSQL: the `ParticipantStore` of hatp_mcp.store.participant_state.

Each put is one committed statement (durable before it returns: an answer is kept before it is sent). Calls are
synchronous, like the interface (the participant runtime calls it between its own awaits), each one round trip on
a pooled connection. A tool's own data does not live here: effects go through the intent-first path (HATP-PART-10),
not the one-transaction path of a shared SQLite database (HATP-PART-13). One database per participant server:
branch ids and resource names are the participant's own.
"""

from __future__ import annotations

import json
from datetime import datetime

from psycopg import Connection
from psycopg_pool import ConnectionPool

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.store.participant_state import BranchRow
from hatp_mcp.store.postgresql.pools import open_pool, run
from hatp_mcp.store.schema import Schema

__all__ = ["SCHEMA", "PostgresParticipantStore"]

SCHEMA = Schema(
    "participant.state",
    (
        (
            "CREATE TABLE branch_state (txn_id TEXT NOT NULL, branch_id TEXT NOT NULL, row TEXT NOT NULL,"
            " PRIMARY KEY (txn_id, branch_id))",
            "CREATE TABLE lock_state (resource TEXT PRIMARY KEY, state TEXT NOT NULL)",
        ),
    ),
)

Row = tuple[object, ...]


class PostgresParticipantStore:
    """Raises psycopg errors (OperationalError when the server is unreachable); `close()` it."""

    def __init__(self, url: str) -> None:
        self._pool: ConnectionPool[Connection[Row]] = open_pool(url, SCHEMA)

    def close(self) -> None:
        self._pool.close()

    def get(self, txn_id: str, branch_id: str) -> BranchRow | None:
        found = run(
            self._pool,
            lambda conn: conn.execute(
                "SELECT row FROM branch_state WHERE txn_id = %s AND branch_id = %s", (txn_id, branch_id)
            ).fetchone(),
            idempotent=True,
        )
        return BranchRow.from_json(txn_id, branch_id, str(found[0])) if found else None

    def branches(self, txn_id: str) -> list[BranchRow]:
        found = run(
            self._pool,
            lambda conn: conn.execute(
                "SELECT branch_id, row FROM branch_state WHERE txn_id = %s ORDER BY branch_id", (txn_id,)
            ).fetchall(),
            idempotent=True,
        )
        return [BranchRow.from_json(txn_id, str(branch_id), str(text)) for branch_id, text in found]

    def put(self, row: BranchRow) -> None:
        text = row.to_json()
        run(
            self._pool,
            lambda conn: conn.execute(
                "INSERT INTO branch_state (txn_id, branch_id, row) VALUES (%s, %s, %s)"
                " ON CONFLICT (txn_id, branch_id) DO UPDATE SET row = EXCLUDED.row",
                (row.txn_id, row.branch_id, text),
            ),
            idempotent=True,  # the whole row: a second run writes the same (one round trip, no BEGIN/COMMIT)
        )

    def get_lock(self, resource: str) -> dict[str, object] | None:
        found = run(
            self._pool,
            lambda conn: conn.execute("SELECT state FROM lock_state WHERE resource = %s", (resource,)).fetchone(),
            idempotent=True,
        )
        if found is None:
            return None
        d = json.loads(str(found[0]))
        return {**d, "expiresAt": parse_ts(d["expiresAt"])}

    def put_lock(self, resource: str, state: dict[str, object]) -> None:
        expires = state["expiresAt"]
        text = json.dumps({**state, "expiresAt": format_ts(expires) if isinstance(expires, datetime) else expires})
        run(
            self._pool,
            lambda conn: conn.execute(
                "INSERT INTO lock_state (resource, state) VALUES (%s, %s)"
                " ON CONFLICT (resource) DO UPDATE SET state = EXCLUDED.state",
                (resource, text),
            ),
            idempotent=True,
        )

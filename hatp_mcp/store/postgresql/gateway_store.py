"""The Human Gateway's state on PostgreSQL: the `GatewayStore` of hatp_mcp.store.gateway_store.

Every change is one database transaction committed before the call returns; a read-modify-write of an ask holds
its row (``SELECT ... FOR UPDATE``), so two processes on one database (two gateways, or a gateway and `hatp
inbox`) never interleave on one ask. Contact details live only in `contacts`. Calls are synchronous, like the
interface. A call whose connection was lost before its commit runs again whole (hatp_mcp.store.postgresql.pools.run),
so a `change` given to `update` may be called again with the ask as then stored: it must decide from its argument.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from psycopg import Connection
from psycopg_pool import ConnectionPool

from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.store.gateway_store import StoredAsk, StoredProof, TimerStep, Write, step_taken
from hatp_mcp.store.postgresql.pools import open_pool, run
from hatp_mcp.store.schema import Schema

__all__ = ["SCHEMA", "PostgresGatewayStore"]

SCHEMA = Schema(
    "gateway",
    (
        (
            "CREATE TABLE asks (ask_id TEXT PRIMARY KEY, txn_id TEXT, requirement_id TEXT, state TEXT NOT NULL,"
            " record TEXT, vote TEXT, evidence TEXT, created_seq BIGINT GENERATED ALWAYS AS IDENTITY)",
            "CREATE INDEX asks_by_state ON asks (state, created_seq)",
            "CREATE TABLE contacts (human TEXT NOT NULL, channel TEXT NOT NULL, address TEXT NOT NULL,"
            " PRIMARY KEY (human, channel))",
            "CREATE TABLE proofs (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ask_id TEXT NOT NULL,"
            " proof TEXT NOT NULL, status TEXT NOT NULL, rule TEXT, reason TEXT)",
            "CREATE INDEX proofs_by_ask ON proofs (ask_id, status)",
            "CREATE INDEX proofs_by_status ON proofs (status)",
            "CREATE TABLE used_nonces (nonce TEXT PRIMARY KEY, ask_id TEXT NOT NULL)",
            "CREATE TABLE outbox (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ask_id TEXT NOT NULL,"
            " kind TEXT NOT NULL, recipient TEXT, message TEXT NOT NULL)",
        ),
        (  # 2: timer steps (HATP-GW-76), written in the transaction that applies the step
            "CREATE TABLE timer_steps (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ask_id TEXT NOT NULL,"
            " timer TEXT NOT NULL, due_at TEXT NOT NULL, owner TEXT NOT NULL, taken_at TEXT NOT NULL,"
            " UNIQUE (ask_id, timer, due_at))",
        ),
    ),
)

Row = tuple[Any, ...]
T = TypeVar("T")


def _row(row: Row) -> StoredAsk:
    ask_id, state, record, vote, evidence = row
    return StoredAsk(
        ask_id=ask_id,
        state=state,
        record=AskRecord.model_validate_json(record) if record else None,
        vote=json.loads(vote) if vote else None,
        evidence=json.loads(evidence) if evidence else None,
    )


class PostgresGatewayStore:
    """Raises psycopg errors (OperationalError when the server is unreachable); `close()` it."""

    def __init__(self, url: str) -> None:
        self._pool: ConnectionPool[Connection[Row]] = open_pool(url, SCHEMA)

    def close(self) -> None:
        self._pool.close()

    def _write(self, work: Callable[[Connection[Row]], T]) -> T:
        return run(self._pool, work, idempotent=False)

    def _read(self, work: Callable[[Connection[Row]], T]) -> T:
        return run(self._pool, work, idempotent=True)

    @staticmethod
    def _get(conn: Connection[Row], ask_id: str, *, lock: bool = False) -> StoredAsk | None:
        sql = "SELECT ask_id, state, record, vote, evidence FROM asks WHERE ask_id = %s"
        row = conn.execute(sql + " FOR UPDATE" if lock else sql, (ask_id,)).fetchone()
        return _row(row) if row else None

    def get(self, ask_id: str) -> StoredAsk | None:
        return self._read(lambda conn: self._get(conn, ask_id))

    @staticmethod
    def _put(conn: Connection[Row], s: StoredAsk) -> None:
        rec = s.record
        conn.execute(
            "UPDATE asks SET state = %s, record = %s, vote = %s, evidence = %s WHERE ask_id = %s",
            (
                s.state,
                rec.model_dump_json(by_alias=True, exclude_none=True) if rec else None,
                json.dumps(s.vote) if s.vote is not None else None,
                json.dumps(s.evidence) if s.evidence is not None else None,
                s.ask_id,
            ),
        )

    def create(self, stored: StoredAsk, txn_id: str | None = None, requirement_id: str | None = None) -> StoredAsk:
        return self._write(lambda conn: self._create(conn, stored, txn_id, requirement_id))

    def _create(
        self, conn: Connection[Row], stored: StoredAsk, txn_id: str | None, requirement_id: str | None
    ) -> StoredAsk:
        inserted = conn.execute(
            "INSERT INTO asks (ask_id, txn_id, requirement_id, state) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (ask_id) DO NOTHING RETURNING ask_id",
            (stored.ask_id, txn_id, requirement_id, stored.state),
        ).fetchone()
        if inserted is None:
            existing = self._get(conn, stored.ask_id)
            if existing is None:  # asks are never deleted: the row that conflicted is there
                raise KeyError(stored.ask_id)
            return existing
        self._put(conn, stored)
        return stored

    def update(self, ask_id: str, change: Callable[[StoredAsk], StoredAsk]) -> StoredAsk:
        return self._write(lambda conn: self._update(conn, ask_id, change))

    def _update(self, conn: Connection[Row], ask_id: str, change: Callable[[StoredAsk], StoredAsk]) -> StoredAsk:
        current = self._get(conn, ask_id, lock=True)
        if current is None:
            raise KeyError(ask_id)
        new = change(current)
        if new != current:
            self._put(conn, new)
        return new

    def write(self, ask_id: str, change: Callable[[StoredAsk], Write]) -> Write:
        """See GatewayStore.write (HATP-GW-76): the ask's row held (FOR UPDATE) from the read to the commit."""
        return self._write(lambda conn: self._write_step(conn, ask_id, change))

    def _write_step(self, conn: Connection[Row], ask_id: str, change: Callable[[StoredAsk], Write]) -> Write:
        current = self._get(conn, ask_id, lock=True)
        if current is None:
            raise KeyError(ask_id)
        done = change(current)
        for step in done.steps:
            taken = conn.execute(
                "INSERT INTO timer_steps (ask_id, timer, due_at, owner, taken_at) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (ask_id, timer, due_at) DO NOTHING RETURNING seq",
                (step.ask_id, step.timer, step.due_at, step.owner, step.taken_at),
            ).fetchone()
            if taken is None:
                row = conn.execute(
                    "SELECT owner FROM timer_steps WHERE ask_id = %s AND timer = %s AND due_at = %s",
                    (step.ask_id, step.timer, step.due_at),
                ).fetchone()
                raise step_taken(step, str(row[0]) if row else "another process")
        if done.stored != current:
            self._put(conn, done.stored)
        for sent in done.sent:
            conn.execute(
                "INSERT INTO outbox (ask_id, kind, recipient, message) VALUES (%s, %s, %s, %s)",
                (ask_id, sent.kind, sent.recipient, json.dumps(sent.message)),
            )
        return done

    def timer_steps(self, ask_id: str) -> list[TimerStep]:
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT ask_id, timer, due_at, owner, taken_at FROM timer_steps WHERE ask_id = %s ORDER BY seq",
                (ask_id,),
            ).fetchall()
        )
        return [TimerStep(str(a), str(w), str(d), str(o), str(t)) for a, w, d, o, t in rows]

    def update_spending(
        self,
        ask_id: str,
        nonce: str,
        change: Callable[[StoredAsk, bool], StoredAsk],
        proof_seq: int | None = None,
    ) -> StoredAsk:
        return self._write(lambda conn: self._spend(conn, ask_id, nonce, change, proof_seq))

    def _spend(
        self,
        conn: Connection[Row],
        ask_id: str,
        nonce: str,
        change: Callable[[StoredAsk, bool], StoredAsk],
        proof_seq: int | None,
    ) -> StoredAsk:
        current = self._get(conn, ask_id, lock=True)
        if current is None:
            raise KeyError(ask_id)
        if proof_seq is not None:
            row = conn.execute("SELECT status FROM proofs WHERE seq = %s FOR UPDATE", (proof_seq,)).fetchone()
            if row is None or row[0] != "submitted":
                return current  # landed (or refused) by another process: its outcome stands
            conn.execute("UPDATE proofs SET status = 'accepted' WHERE seq = %s", (proof_seq,))
        used = conn.execute("SELECT 1 FROM used_nonces WHERE nonce = %s", (nonce,)).fetchone() is not None
        new = change(current, used)
        conn.execute("INSERT INTO used_nonces (nonce, ask_id) VALUES (%s, %s)", (nonce, ask_id))
        if new != current:
            self._put(conn, new)
        return new

    def submit_proof(self, ask_id: str, proof: dict[str, Any]) -> int:
        text = json.dumps(proof)
        row = self._write(
            lambda conn: conn.execute(
                "INSERT INTO proofs (ask_id, proof, status) VALUES (%s, %s, 'submitted') RETURNING seq", (ask_id, text)
            ).fetchone()
        )
        return int(row[0]) if row else 0

    def proofs(self, ask_id: str | None = None, status: str | None = None) -> list[StoredProof]:
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT seq, ask_id, proof, status, rule, reason FROM proofs"
                " WHERE (%s::text IS NULL OR ask_id = %s) AND (%s::text IS NULL OR status = %s) ORDER BY seq",
                (ask_id, ask_id, status, status),
            ).fetchall()
        )
        return [StoredProof(int(q), a, json.loads(p), st, r, why) for q, a, p, st, r, why in rows]

    def asks_with_proofs(self, status: str) -> list[str]:
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT ask_id FROM proofs WHERE status = %s GROUP BY ask_id ORDER BY MIN(seq)", (status,)
            ).fetchall()
        )
        return [str(a) for (a,) in rows]

    def settle_proof(self, seq: int, status: str, rule: str | None = None, reason: str | None = None) -> None:
        self._write(
            lambda conn: conn.execute(
                "UPDATE proofs SET status = %s, rule = %s, reason = %s WHERE seq = %s AND status = 'submitted'",
                (status, rule, reason, seq),
            )
        )

    def asks(self, state: str | None = None) -> list[StoredAsk]:
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT ask_id, state, record, vote, evidence FROM asks WHERE (%s::text IS NULL OR state = %s)"
                " ORDER BY created_seq",
                (state, state),
            ).fetchall()
        )
        return [_row(r) for r in rows]

    def set_contact(self, human: str, channel: str, address: str) -> None:
        self._write(
            lambda conn: conn.execute(
                "INSERT INTO contacts (human, channel, address) VALUES (%s, %s, %s)"
                " ON CONFLICT (human, channel) DO UPDATE SET address = EXCLUDED.address",
                (human, channel, address),
            )
        )

    def contacts_for(self, human: str) -> dict[str, str]:
        rows = self._read(
            lambda conn: conn.execute("SELECT channel, address FROM contacts WHERE human = %s", (human,)).fetchall()
        )
        return {str(c): str(a) for c, a in rows}

    def record_sent(self, ask_id: str, kind: str, message: dict[str, Any], recipient: str | None = None) -> None:
        text = json.dumps(message)
        self._write(
            lambda conn: conn.execute(
                "INSERT INTO outbox (ask_id, kind, recipient, message) VALUES (%s, %s, %s, %s)",
                (ask_id, kind, recipient, text),
            )
        )

    def sent(self) -> list[tuple[str, str, str | None, dict[str, Any]]]:
        rows = self._read(
            lambda conn: conn.execute("SELECT ask_id, kind, recipient, message FROM outbox ORDER BY seq").fetchall()
        )
        return [(a, k, r, json.loads(m)) for a, k, r, m in rows]

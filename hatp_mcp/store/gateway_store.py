"""The Human Gateway's durable state: asks (their record and the signed evidence last sent), the
contacts table, the outbox of every message that left the gateway, the people's signed decision proofs left by
`hatp inbox` (submitted, then accepted or refused by the gateway), the nonces of every proof that counted, and
the timer steps taken (an ask's SLA or deadline applied, once, by one owner: spec/gateway.md HATP-GW-76).

`GatewayStore` is the interface; `SqliteGatewayStore` the embedded default (``DIR/gateway.db``),
hatp_mcp.store.postgresql.gateway_store the shared one. Several processes share one store (the gateway and
`hatp inbox`), so every change is an atomic read-modify-write (SQLite: inside ``BEGIN IMMEDIATE``). Contact
details live only in the `contacts` table: nothing here copies them into an ask, a vote or the outbox. This
module knows nothing of the protocol beyond storing AskRecords.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.errors import HatpError
from hatp_mcp.store.schema import Schema
from hatp_mcp.store.sqlite import immediate, open_versioned

__all__ = [
    "DB_NAME",
    "SQLITE_SCHEMA",
    "GatewayStore",
    "Sent",
    "SqliteGatewayStore",
    "StoredAsk",
    "StoredProof",
    "TimerStep",
    "Write",
    "step_taken",
]

DB_NAME = "gateway.db"

_SQLITE_V1 = """
CREATE TABLE IF NOT EXISTS asks (
    ask_id TEXT PRIMARY KEY,
    txn_id TEXT,
    requirement_id TEXT,
    state TEXT NOT NULL,
    record TEXT,
    vote TEXT,
    evidence TEXT,
    created_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS contacts (
    human TEXT NOT NULL,
    channel TEXT NOT NULL,
    address TEXT NOT NULL,
    PRIMARY KEY (human, channel)
);
CREATE TABLE IF NOT EXISTS proofs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ask_id TEXT NOT NULL,
    proof TEXT NOT NULL,
    status TEXT NOT NULL,
    rule TEXT,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS proofs_by_ask ON proofs (ask_id, status);
CREATE INDEX IF NOT EXISTS proofs_by_status ON proofs (status);
CREATE TABLE IF NOT EXISTS used_nonces (
    nonce TEXT PRIMARY KEY,
    ask_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ask_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    recipient TEXT,
    message TEXT NOT NULL
);
"""
# 2: timer steps (HATP-GW-76), one row per (ask, instant due), written in the transaction that applies the step
_SQLITE_V2 = (
    "CREATE TABLE timer_steps (ask_id TEXT NOT NULL, timer TEXT NOT NULL, due_at TEXT NOT NULL, owner TEXT NOT NULL,"
    " taken_at TEXT NOT NULL, seq INTEGER PRIMARY KEY AUTOINCREMENT, UNIQUE (ask_id, timer, due_at))",
)
SQLITE_SCHEMA = Schema("gateway", (tuple(s.strip() for s in _SQLITE_V1.split(";") if s.strip()), _SQLITE_V2))


def step_taken(step: TimerStep, holder: str) -> HatpError:
    """HATP-GW-76: a timer step recorded already (by `holder`) is never applied again."""
    return HatpError(
        "HATP-GW-76",
        f"the {step.timer} timer of ask {step.ask_id} due at {step.due_at} was applied by {holder!r};"
        f" {step.owner!r} does not apply it again",
        path=f"timer_steps.{step.ask_id}.{step.timer}.{step.due_at}",
        code="TIMER_STEP_TAKEN",
        fix="read the ask again: its next timer is the one to wait for",
    )


@dataclass(frozen=True, slots=True)
class StoredAsk:
    """One ask as stored. `record` is None when the gateway refused to route it (then `vote` says why)."""

    ask_id: str
    state: str
    record: AskRecord | None
    vote: dict[str, Any] | None
    evidence: dict[str, Any] | None

    def with_record(self, record: AskRecord) -> StoredAsk:
        return replace(self, record=record, state=record.state)


@dataclass(frozen=True, slots=True)
class Sent:
    """A message that leaves the gateway, for the outbox: its kind, what it says, whom (None: the coordinator)."""

    kind: str
    message: dict[str, Any]
    recipient: str | None = None


@dataclass(frozen=True, slots=True)
class TimerStep:
    """One timer of an ask applied (HATP-GW-76): which (`sla HUMAN`, a person's SLA; `deadline`), the instant it was
    due, the process that applied it (owner id) and when (that process's clock)."""

    ask_id: str
    timer: str
    due_at: str
    owner: str
    taken_at: str


@dataclass(frozen=True, slots=True)
class Write:
    """One atomic change of an ask: the ask as it becomes, the messages the change sends (kept in the outbox in
    the same transaction) and the timer steps it takes (none: it applies no timer)."""

    stored: StoredAsk
    sent: tuple[Sent, ...] = ()
    steps: tuple[TimerStep, ...] = ()


@dataclass(frozen=True, slots=True)
class StoredProof:
    """A decision proof left in the store: `submitted` until the gateway verifies it, then `accepted` or
    `refused` (with the rule and reason)."""

    seq: int
    ask_id: str
    proof: dict[str, Any]
    status: str
    rule: str | None = None
    reason: str | None = None


class GatewayStore(Protocol):
    """What the gateway runtime and `hatp inbox` need. Every call is durable before it returns (HATP-GW-13: an ask
    is kept before its vote is answered) and every change is atomic, also between processes sharing the store."""

    def close(self) -> None: ...

    def get(self, ask_id: str) -> StoredAsk | None: ...

    def create(self, stored: StoredAsk, txn_id: str | None = None, requirement_id: str | None = None) -> StoredAsk:
        """Insert an ask unless one with that id exists; return what is stored (idempotent)."""
        ...

    def update(self, ask_id: str, change: Callable[[StoredAsk], StoredAsk]) -> StoredAsk:
        """Apply `change` to the stored ask atomically and return the result. Raises KeyError when there is no
        such ask; whatever `change` raises leaves the stored ask as it was."""
        ...

    def write(self, ask_id: str, change: Callable[[StoredAsk], Write]) -> Write:
        """HATP-GW-76: apply `change` to the stored ask in one transaction that holds it, with the messages it sends
        (outbox) and the timer step it takes. Raises KeyError (no such ask), HatpError HATP-GW-76 (TIMER_STEP_TAKEN:
        that step is recorded already) or whatever `change` raises; then nothing of the write is kept."""
        ...

    def timer_steps(self, ask_id: str) -> list[TimerStep]:
        """The timer steps taken on an ask, in the order they were taken."""
        ...

    def update_spending(
        self,
        ask_id: str,
        nonce: str,
        change: Callable[[StoredAsk, bool], StoredAsk],
        proof_seq: int | None = None,
    ) -> StoredAsk:
        """`update` for a decision proof: `change` gets the ask and whether `nonce` was spent before; the nonce is
        spent in the same transaction. Whatever `change` raises spends nothing. With `proof_seq` (a proof left in
        the store), that proof is settled `accepted` in the same transaction, and a proof another process settled
        already is left as it is: `change` is not called and the ask is returned unchanged (HATP-GW-77). Raises
        KeyError (no such ask)."""
        ...

    def submit_proof(self, ask_id: str, proof: dict[str, Any]) -> int: ...

    def proofs(self, ask_id: str | None = None, status: str | None = None) -> list[StoredProof]: ...

    def asks_with_proofs(self, status: str) -> list[str]: ...

    def settle_proof(self, seq: int, status: str, rule: str | None = None, reason: str | None = None) -> None:
        """Record what the gateway made of a submitted proof; a proof settled already keeps its first outcome."""
        ...

    def asks(self, state: str | None = None) -> list[StoredAsk]: ...

    def set_contact(self, human: str, channel: str, address: str) -> None: ...

    def contacts_for(self, human: str) -> dict[str, str]: ...

    def record_sent(self, ask_id: str, kind: str, message: dict[str, Any], recipient: str | None = None) -> None: ...

    def sent(self) -> list[tuple[str, str, str | None, dict[str, Any]]]: ...


class SqliteGatewayStore:
    """Durable asks, contacts and outbox in ``DIR/gateway.db``. Calls are short and thread-safe."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self.path, self._conn = open_versioned(path, SQLITE_SCHEMA, self._lock, DB_NAME)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _tx(self) -> AbstractContextManager[None]:
        return immediate(self._conn, self._lock)

    @staticmethod
    def _row(row: tuple[Any, ...]) -> StoredAsk:
        ask_id, state, record, vote, evidence = row
        return StoredAsk(
            ask_id=ask_id,
            state=state,
            record=AskRecord.model_validate_json(record) if record else None,
            vote=json.loads(vote) if vote else None,
            evidence=json.loads(evidence) if evidence else None,
        )

    def _get(self, ask_id: str) -> StoredAsk | None:
        row = self._conn.execute(
            "SELECT ask_id, state, record, vote, evidence FROM asks WHERE ask_id = ?", (ask_id,)
        ).fetchone()
        return self._row(row) if row else None

    def get(self, ask_id: str) -> StoredAsk | None:
        with self._lock:
            return self._get(ask_id)

    def _put(self, s: StoredAsk) -> None:
        rec = s.record
        self._conn.execute(
            "UPDATE asks SET state = ?, record = ?, vote = ?, evidence = ? WHERE ask_id = ?",
            (
                s.state,
                rec.model_dump_json(by_alias=True, exclude_none=True) if rec else None,
                json.dumps(s.vote) if s.vote is not None else None,
                json.dumps(s.evidence) if s.evidence is not None else None,
                s.ask_id,
            ),
        )

    def create(self, stored: StoredAsk, txn_id: str | None = None, requirement_id: str | None = None) -> StoredAsk:
        """Insert an ask unless one with that id exists; return what is stored (idempotent)."""
        with self._tx():
            existing = self._get(stored.ask_id)
            if existing is not None:
                return existing
            seq = self._conn.execute("SELECT COALESCE(MAX(created_seq), 0) + 1 FROM asks").fetchone()[0]
            self._conn.execute(
                "INSERT INTO asks (ask_id, txn_id, requirement_id, state, created_seq) VALUES (?, ?, ?, ?, ?)",
                (stored.ask_id, txn_id, requirement_id, stored.state, seq),
            )
            self._put(stored)
            return stored

    def update(self, ask_id: str, change: Callable[[StoredAsk], StoredAsk]) -> StoredAsk:
        """Apply `change` to the stored ask atomically and return the result.

        Raises KeyError when there is no such ask; whatever `change` raises leaves the stored ask as it was.
        """
        with self._tx():
            current = self._get(ask_id)
            if current is None:
                raise KeyError(ask_id)
            new = change(current)
            if new != current:
                self._put(new)
            return new

    def write(self, ask_id: str, change: Callable[[StoredAsk], Write]) -> Write:
        """See GatewayStore.write (HATP-GW-76). Raises KeyError, HatpError TIMER_STEP_TAKEN or what `change` raises;
        nothing is kept then."""
        with self._tx():
            current = self._get(ask_id)
            if current is None:
                raise KeyError(ask_id)
            done = change(current)
            for step in done.steps:
                cur = self._conn.execute(
                    "INSERT OR IGNORE INTO timer_steps (ask_id, timer, due_at, owner, taken_at) VALUES (?, ?, ?, ?, ?)",
                    (step.ask_id, step.timer, step.due_at, step.owner, step.taken_at),
                )
                if cur.rowcount != 1:
                    (holder,) = self._conn.execute(
                        "SELECT owner FROM timer_steps WHERE ask_id = ? AND timer = ? AND due_at = ?",
                        (step.ask_id, step.timer, step.due_at),
                    ).fetchone()
                    raise step_taken(step, holder)
            if done.stored != current:
                self._put(done.stored)
            for sent in done.sent:
                self._conn.execute(
                    "INSERT INTO outbox (ask_id, kind, recipient, message) VALUES (?, ?, ?, ?)",
                    (ask_id, sent.kind, sent.recipient, json.dumps(sent.message)),
                )
            return done

    def timer_steps(self, ask_id: str) -> list[TimerStep]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT ask_id, timer, due_at, owner, taken_at FROM timer_steps WHERE ask_id = ? ORDER BY seq",
                (ask_id,),
            ).fetchall()
        return [TimerStep(*r) for r in rows]

    def update_spending(
        self,
        ask_id: str,
        nonce: str,
        change: Callable[[StoredAsk, bool], StoredAsk],
        proof_seq: int | None = None,
    ) -> StoredAsk:
        """See GatewayStore.update_spending. Raises KeyError when there is no such ask."""
        with self._tx():
            current = self._get(ask_id)
            if current is None:
                raise KeyError(ask_id)
            if proof_seq is not None:
                row = self._conn.execute("SELECT status FROM proofs WHERE seq = ?", (proof_seq,)).fetchone()
                if row is None or row[0] != "submitted":
                    return current  # landed (or refused) by another process: its outcome stands
                self._conn.execute("UPDATE proofs SET status = 'accepted' WHERE seq = ?", (proof_seq,))
            used = self._conn.execute("SELECT 1 FROM used_nonces WHERE nonce = ?", (nonce,)).fetchone() is not None
            new = change(current, used)
            self._conn.execute("INSERT INTO used_nonces (nonce, ask_id) VALUES (?, ?)", (nonce, ask_id))
            if new != current:
                self._put(new)
            return new

    def submit_proof(self, ask_id: str, proof: dict[str, Any]) -> int:
        """Leave a person's signed decision for the gateway to verify; returns its sequence number."""
        with self._tx():
            cur = self._conn.execute(
                "INSERT INTO proofs (ask_id, proof, status) VALUES (?, ?, 'submitted')", (ask_id, json.dumps(proof))
            )
            return int(cur.lastrowid or 0)

    def proofs(self, ask_id: str | None = None, status: str | None = None) -> list[StoredProof]:
        """Proofs left in the store, oldest first; only those of `ask_id` and/or in `status` when given."""
        sql = "SELECT seq, ask_id, proof, status, rule, reason FROM proofs WHERE 1 = 1"
        args: list[str] = []
        if ask_id is not None:
            sql, args = sql + " AND ask_id = ?", [*args, ask_id]
        if status is not None:
            sql, args = sql + " AND status = ?", [*args, status]
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY seq", args).fetchall()
        return [StoredProof(q, a, json.loads(p), st, r, why) for q, a, p, st, r, why in rows]

    def asks_with_proofs(self, status: str) -> list[str]:
        """The ids of asks with proofs in `status` (the gateway's timer loop looks for `submitted` ones), in the
        order their first such proof was left."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT ask_id FROM proofs WHERE status = ? GROUP BY ask_id ORDER BY MIN(seq)", (status,)
            ).fetchall()
        return [a for (a,) in rows]

    def settle_proof(self, seq: int, status: str, rule: str | None = None, reason: str | None = None) -> None:
        """Record what the gateway made of a submitted proof (`accepted` or `refused` with rule and reason)."""
        with self._tx():
            self._conn.execute(
                "UPDATE proofs SET status = ?, rule = ?, reason = ? WHERE seq = ? AND status = 'submitted'",
                (status, rule, reason, seq),
            )

    def asks(self, state: str | None = None) -> list[StoredAsk]:
        """Every ask in creation order, or only those in `state`."""
        sql = "SELECT ask_id, state, record, vote, evidence FROM asks"
        args: tuple[str, ...] = ()
        if state is not None:
            sql += " WHERE state = ?"
            args = (state,)
        with self._lock:
            rows = self._conn.execute(sql + " ORDER BY created_seq", args).fetchall()
        return [self._row(r) for r in rows]

    def set_contact(self, human: str, channel: str, address: str) -> None:
        with self._tx():
            self._conn.execute(
                "INSERT OR REPLACE INTO contacts (human, channel, address) VALUES (?, ?, ?)", (human, channel, address)
            )

    def contacts_for(self, human: str) -> dict[str, str]:
        with self._lock:
            rows = self._conn.execute("SELECT channel, address FROM contacts WHERE human = ?", (human,)).fetchall()
        return {c: a for c, a in rows}

    def record_sent(self, ask_id: str, kind: str, message: dict[str, Any], recipient: str | None = None) -> None:
        """Log a message that leaves the gateway (what it says, never where it was delivered)."""
        with self._tx():
            self._conn.execute(
                "INSERT INTO outbox (ask_id, kind, recipient, message) VALUES (?, ?, ?, ?)",
                (ask_id, kind, recipient, json.dumps(message)),
            )

    def sent(self) -> list[tuple[str, str, str | None, dict[str, Any]]]:
        """Every logged outgoing message: (askId, kind, recipient address, message)."""
        with self._lock:
            rows = self._conn.execute("SELECT ask_id, kind, recipient, message FROM outbox ORDER BY seq").fetchall()
        return [(a, k, r, json.loads(m)) for a, k, r, m in rows]

"""The gateway's durable delivery queue: one row per notice (ask, person, kind), keyed by its idempotency key
(HATP-GW-63), with where its delivery stands (queued, sent, failed), the channel it is on, the attempts made there,
when the next one is due, and the claim of the process making the attempt (owner id, epoch, lease: HATP-GW-78/79).

`DeliveryQueue` is the interface; `DeliveryStore` the embedded default in SQLite (``DIR/deliveries.db``, shared by
the gateway processes of one machine), hatp_mcp.store.postgresql.deliveries the shared one (the gateway's
PostgreSQL database, shared by gateways on any machine). Leases run on the database's clock (SQLite: the machine's,
which every process on one file shares; PostgreSQL: the server's), so processes whose clocks differ, or that run on
a fake clock, judge a lapse alike.

A notice is queued once (a second enqueue of the same key is a no-op), so a gateway that restarts finds every
notice it had not sent and sends it, and never sends one it recorded as sent. The rendered notice is stored with
its row, so a restart sends the same words. Contact details are never stored here (the channel's address is read
from the gateway's contacts table when sending). Knows nothing of the protocol beyond storing Notices.
"""

from __future__ import annotations

import json
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hatp_mcp.core.gateway.notice import Notice, NoticeKind
from hatp_mcp.errors import HatpError
from hatp_mcp.store.schema import Schema
from hatp_mcp.store.sqlite import immediate, json_text, open_versioned

__all__ = [
    "COLUMNS",
    "DELIVERIES_DB",
    "SQLITE_SCHEMA",
    "Claim",
    "Delivery",
    "DeliveryQueue",
    "DeliveryStore",
    "claim_lost",
    "delivery_row",
]

DELIVERIES_DB = "deliveries.db"

_SQLITE_V1 = """
CREATE TABLE IF NOT EXISTS deliveries (
    key TEXT PRIMARY KEY,
    ask_id TEXT NOT NULL,
    human TEXT NOT NULL,
    kind TEXT NOT NULL,
    notice TEXT NOT NULL,
    state TEXT NOT NULL,
    channel INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    next_at TEXT NOT NULL,
    sent_via TEXT,
    failures TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS deliveries_by_state ON deliveries (state, next_at);
CREATE INDEX IF NOT EXISTS deliveries_by_ask ON deliveries (ask_id);
"""
# 2: claims (HATP-GW-78): who makes the attempt, at which epoch, until when (julianday on the machine's clock)
_SQLITE_V2 = (
    "ALTER TABLE deliveries ADD COLUMN claim_owner TEXT",
    "ALTER TABLE deliveries ADD COLUMN claim_epoch INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE deliveries ADD COLUMN claim_until REAL",
)
# A file written before versions (v1's statements, IF NOT EXISTS) is taken as version 0 and gains the claims.
SQLITE_SCHEMA = Schema("gateway.deliveries", (tuple(s.strip() for s in _SQLITE_V1.split(";") if s.strip()), _SQLITE_V2))

COLUMNS = "notice, state, channel, attempt, next_at, sent_via, failures"
_SELECT = f"SELECT {COLUMNS} FROM deliveries"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notice's delivery. `state`: queued (due at `next_at`), sent (over `sent_via`), failed (no channel
    reached the person: `failures` holds each channel's last error, never an address), inbox (no push channel:
    the ask waits in the inbox)."""

    notice: Notice
    state: str
    channel: int
    attempt: int
    next_at: str
    sent_via: str | None
    failures: list[str]


@dataclass(frozen=True, slots=True)
class Claim:
    """A due delivery taken by one process (HATP-GW-78): only this owner, at this epoch, records its outcome."""

    delivery: Delivery
    owner: str
    epoch: int

    @property
    def key(self) -> str:
        return self.delivery.notice.key


def claim_lost(claim: Claim, holder: str | None, epoch: int | None) -> HatpError:
    """HATP-GW-79: the outcome of an attempt whose claim lapsed and was taken over (or was never held)."""
    now = f"held by {holder!r} at epoch {epoch}" if holder else f"not held (last epoch {epoch})"
    return HatpError(
        "HATP-GW-79",
        f"delivery {claim.key} is no longer claimed by {claim.owner!r} at epoch {claim.epoch} (it is {now}):"
        " its outcome is not recorded",
        path=f"deliveries.{claim.key}.claim",
        code="CLAIM_LOST",
        fix="nothing to do: the claim's lease lapsed and whoever holds it now makes the attempt (same key)",
    )


class DeliveryQueue(Protocol):
    """What the Deliverer needs from its queue. Every call is durable before it returns and atomic, also between
    processes sharing the queue (HATP-GW-78)."""

    def close(self) -> None: ...

    def enqueue(self, notice: Notice, at: str, state: str = "queued") -> bool:
        """Queue `notice`, due at `at`; False (and nothing changes) when its key is already queued or sent.
        `state="skipped"` records a notice that is not owed (nothing is sent), so the ask stops being open."""
        ...

    def get(self, key: str) -> Delivery | None: ...

    def due(self, now: str) -> list[Delivery]:
        """Every queued delivery due at or before `now`, oldest first, claimed or not."""
        ...

    def claim_due(self, now: str, owner: str, lease_seconds: float, limit: int = 64) -> list[Claim]:
        """HATP-GW-78: take up to `limit` queued deliveries due at or before `now` (the gateway's clock) that no
        live claim holds, each at its next epoch under a lease of `lease_seconds` (the database's clock), in one
        atomic write; oldest first. A delivery another process holds is left to it. Raises ValueError for a
        negative lease."""
        ...

    def next_due(self) -> str | None: ...

    def kinds_for(self, ask_id: str) -> set[tuple[str, NoticeKind]]:
        """(human, kind) of every notice of the ask ever queued, in any state."""
        ...

    def open_asks(self) -> list[str]:
        """Asks someone was told of and not yet told it closed: the ones whose closing may owe a notice."""
        ...

    def settle(
        self,
        claim: Claim,
        *,
        state: str,
        channel: int,
        attempt: int,
        next_at: str,
        sent_via: str | None = None,
        failures: list[str] | None = None,
    ) -> None:
        """Record the attempt's outcome and release the claim, only while `claim` holds the delivery (same owner,
        same epoch). Raises HatpError HATP-GW-79 (CLAIM_LOST) otherwise; nothing is recorded then."""
        ...

    def all(self) -> list[Delivery]: ...


class DeliveryStore:
    """The delivery queue in SQLite. Calls are short and thread-safe."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self.path, self._conn = open_versioned(path, SQLITE_SCHEMA, self._lock, DELIVERIES_DB)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _tx(self) -> AbstractContextManager[None]:
        return immediate(self._conn, self._lock)

    def enqueue(self, notice: Notice, at: str, state: str = "queued") -> bool:
        with self._tx():
            cur = self._conn.execute(
                "INSERT OR IGNORE INTO deliveries (key, ask_id, human, kind, notice, state, next_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (notice.key, notice.ask_id, notice.human, notice.kind, json_text(notice.wire()), state, at),
            )
            return cur.rowcount == 1

    def get(self, key: str) -> Delivery | None:
        with self._lock:
            row = self._conn.execute(_SELECT + " WHERE key = ?", (key,)).fetchone()
        return delivery_row(row) if row else None

    def due(self, now: str) -> list[Delivery]:
        with self._lock:
            rows = self._conn.execute(
                _SELECT + " WHERE state = 'queued' AND next_at <= ? ORDER BY next_at, key", (now,)
            ).fetchall()
        return [delivery_row(r) for r in rows]

    def claim_due(self, now: str, owner: str, lease_seconds: float, limit: int = 64) -> list[Claim]:
        """See DeliveryQueue.claim_due: in one BEGIN IMMEDIATE transaction (no other process writes between the
        read and the updates), each row found free is updated to this owner at its next epoch."""
        if lease_seconds < 0:
            raise ValueError(f"lease_seconds must be >= 0, not {lease_seconds}")
        with self._tx():
            rows = self._conn.execute(
                f"SELECT {COLUMNS}, key, claim_epoch FROM deliveries WHERE state = 'queued' AND next_at <= ?"
                " AND (claim_owner IS NULL OR claim_until <= julianday('now')) ORDER BY next_at, key LIMIT ?",
                (now, limit),
            ).fetchall()
            claims = []
            for *fields, key, epoch in rows:
                self._conn.execute(
                    "UPDATE deliveries SET claim_owner = ?, claim_epoch = ?,"
                    " claim_until = julianday('now') + ? / 86400.0 WHERE key = ?",
                    (owner, epoch + 1, lease_seconds, key),
                )
                claims.append(Claim(delivery_row(tuple(fields)), owner, epoch + 1))
            return claims

    def next_due(self) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT MIN(next_at) FROM deliveries WHERE state = 'queued'").fetchone()
        return row[0] if row and row[0] is not None else None

    def kinds_for(self, ask_id: str) -> set[tuple[str, NoticeKind]]:
        with self._lock:
            rows = self._conn.execute("SELECT human, kind FROM deliveries WHERE ask_id = ?", (ask_id,)).fetchall()
        return {(r[0], r[1]) for r in rows}

    def open_asks(self) -> list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT ask_id FROM deliveries d WHERE kind = 'ask' AND NOT EXISTS"
                " (SELECT 1 FROM deliveries c WHERE c.ask_id = d.ask_id AND c.human = d.human AND c.kind = 'closed')"
            ).fetchall()
        return [r[0] for r in rows]

    def settle(
        self,
        claim: Claim,
        *,
        state: str,
        channel: int,
        attempt: int,
        next_at: str,
        sent_via: str | None = None,
        failures: list[str] | None = None,
    ) -> None:
        """See DeliveryQueue.settle. Raises HatpError HATP-GW-79 (CLAIM_LOST)."""
        with self._tx():
            cur = self._conn.execute(
                "UPDATE deliveries SET state = ?, channel = ?, attempt = ?, next_at = ?, sent_via = ?, failures = ?,"
                " claim_owner = NULL, claim_until = NULL WHERE key = ? AND claim_owner = ? AND claim_epoch = ?",
                (
                    state,
                    channel,
                    attempt,
                    next_at,
                    sent_via,
                    json.dumps(failures or []),
                    claim.key,
                    claim.owner,
                    claim.epoch,
                ),
            )
            if cur.rowcount != 1:
                row = self._conn.execute(
                    "SELECT claim_owner, claim_epoch FROM deliveries WHERE key = ?", (claim.key,)
                ).fetchone()
                raise claim_lost(claim, row[0] if row else None, row[1] if row else None)

    def all(self) -> list[Delivery]:
        with self._lock:
            rows = self._conn.execute(_SELECT + " ORDER BY rowid").fetchall()
        return [delivery_row(r) for r in rows]


def delivery_row(row: tuple[object, ...]) -> Delivery:
    """A Delivery from the row `COLUMNS` selects (both backends)."""
    notice, state, channel, attempt, next_at, sent_via, failures = row
    return Delivery(
        Notice.from_wire(json.loads(str(notice))),
        str(state),
        int(channel),  # type: ignore[call-overload]
        int(attempt),  # type: ignore[call-overload]
        str(next_at),
        None if sent_via is None else str(sent_via),
        json.loads(str(failures)),
    )

"""The gateway's durable delivery queue in SQLite (``DIR/deliveries.db``): one row per notice (ask, person, kind),
keyed by its idempotency key (HATP-GW-63), with where its delivery stands (queued, sent, failed), the channel it is
on, the attempts made there and when the next one is due.

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

from hatp_mcp.core.humans.notice import Notice, NoticeKind
from hatp_mcp.store.sqlite import immediate, json_text, open_db

__all__ = ["DELIVERIES_DB", "Delivery", "DeliveryStore"]

DELIVERIES_DB = "deliveries.db"

_SCHEMA = """
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


class DeliveryStore:
    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if p.is_dir():
            p = p / DELIVERIES_DB
        self.path = p
        self._conn = open_db(p)
        self._lock = threading.Lock()
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _tx(self) -> AbstractContextManager[None]:
        return immediate(self._conn, self._lock)

    def enqueue(self, notice: Notice, at: str, state: str = "queued") -> bool:
        """Queue `notice`, due at `at`; False (and nothing changes) when its key is already queued or sent.
        `state="skipped"` records a notice that is not owed (nothing is sent), so the ask stops being open."""
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
        return _row(row) if row else None

    def due(self, now: str) -> list[Delivery]:
        """Every queued delivery due at or before `now`, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                _SELECT + " WHERE state = 'queued' AND next_at <= ? ORDER BY next_at, key", (now,)
            ).fetchall()
        return [_row(r) for r in rows]

    def next_due(self) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT MIN(next_at) FROM deliveries WHERE state = 'queued'").fetchone()
        return row[0] if row and row[0] is not None else None

    def kinds_for(self, ask_id: str) -> set[tuple[str, NoticeKind]]:
        """(human, kind) of every notice of the ask ever queued, in any state."""
        with self._lock:
            rows = self._conn.execute("SELECT human, kind FROM deliveries WHERE ask_id = ?", (ask_id,)).fetchall()
        return {(r[0], r[1]) for r in rows}

    def open_asks(self) -> list[str]:
        """Asks someone was told of and not yet told it closed: the ones whose closing may owe a notice."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT ask_id FROM deliveries d WHERE kind = 'ask' AND NOT EXISTS"
                " (SELECT 1 FROM deliveries c WHERE c.ask_id = d.ask_id AND c.human = d.human AND c.kind = 'closed')"
            ).fetchall()
        return [r[0] for r in rows]

    def settle(
        self,
        key: str,
        *,
        state: str,
        channel: int,
        attempt: int,
        next_at: str,
        sent_via: str | None = None,
        failures: list[str] | None = None,
    ) -> None:
        with self._tx():
            self._conn.execute(
                "UPDATE deliveries SET state = ?, channel = ?, attempt = ?, next_at = ?, sent_via = ?, failures = ?"
                " WHERE key = ?",
                (state, channel, attempt, next_at, sent_via, json.dumps(failures or []), key),
            )

    def all(self) -> list[Delivery]:
        with self._lock:
            rows = self._conn.execute(_SELECT + " ORDER BY rowid").fetchall()
        return [_row(r) for r in rows]


_SELECT = "SELECT notice, state, channel, attempt, next_at, sent_via, failures FROM deliveries"


def _row(row: tuple[str, str, int, int, str, str | None, str]) -> Delivery:
    notice, state, channel, attempt, next_at, sent_via, failures = row
    return Delivery(
        Notice.from_wire(json.loads(notice)), state, channel, attempt, next_at, sent_via, json.loads(failures)
    )

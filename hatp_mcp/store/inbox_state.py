"""The web inbox's durable state in SQLite (``DIR/inbox.db``): sign-in sessions (with their CSRF token and expiry),
the WebAuthn challenges the inbox issued (each kept by its nonce until used once or expired: HATP-GW-48), and
each passkey credential's last sign count (HATP-GW-50). Times are RFC 3339 strings the caller computes on its
Clock. Knows nothing of WebAuthn beyond storing these."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatp_mcp.store.sqlite import json_text, open_db

__all__ = ["INBOX_DB", "InboxState", "Session"]

INBOX_DB = "inbox.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    sid TEXT PRIMARY KEY,
    human TEXT NOT NULL,
    csrf TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS challenges (
    nonce TEXT PRIMARY KEY,
    purpose TEXT NOT NULL,
    human TEXT,
    payload TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS counters (
    credential_id TEXT PRIMARY KEY,
    sign_count INTEGER NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class Session:
    sid: str
    human: str
    csrf: str
    expires_at: str


class InboxState:
    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if p.is_dir():
            p = p / INBOX_DB
        self._conn = open_db(p)
        self._lock = threading.Lock()
        self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def open_session(self, session: Session) -> None:
        with self._tx():
            self._conn.execute(
                "INSERT INTO sessions (sid, human, csrf, expires_at) VALUES (?, ?, ?, ?)",
                (session.sid, session.human, session.csrf, session.expires_at),
            )

    def session(self, sid: str, now: str) -> Session | None:
        """The session, if it exists and has not expired at `now` (an expired one is deleted)."""
        with self._tx():
            row = self._conn.execute(
                "SELECT sid, human, csrf, expires_at FROM sessions WHERE sid = ?", (sid,)
            ).fetchone()
            if row is None:
                return None
            if row[3] <= now:
                self._conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))
                return None
            return Session(*row)

    def end_session(self, sid: str) -> None:
        with self._tx():
            self._conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))

    def keep_challenge(
        self, nonce: str, purpose: str, human: str | None, payload: dict[str, Any], expires_at: str
    ) -> None:
        with self._tx():
            self._conn.execute(
                "INSERT INTO challenges (nonce, purpose, human, payload, expires_at) VALUES (?, ?, ?, ?, ?)",
                (nonce, purpose, human, json_text(payload), expires_at),
            )

    def take_challenge(self, nonce: str, purpose: str, now: str) -> tuple[str | None, dict[str, Any]] | None:
        """The challenge kept under `nonce` for `purpose`, removed: a second take finds nothing (single use).
        None when unknown, already used, for another purpose, or expired."""
        with self._tx():
            row = self._conn.execute(
                "SELECT purpose, human, payload, expires_at FROM challenges WHERE nonce = ?", (nonce,)
            ).fetchone()
            if row is None:
                return None
            self._conn.execute("DELETE FROM challenges WHERE nonce = ?", (nonce,))
        if row[0] != purpose or row[3] <= now:
            return None
        return row[1], json.loads(row[2])

    def sign_count(self, credential_id: str) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT sign_count FROM counters WHERE credential_id = ?", (credential_id,)
            ).fetchone()
        return int(row[0]) if row else 0

    def set_sign_count(self, credential_id: str, count: int) -> None:
        with self._tx():
            self._conn.execute(
                "INSERT INTO counters (credential_id, sign_count) VALUES (?, ?)"
                " ON CONFLICT (credential_id) DO UPDATE SET sign_count = MAX(sign_count, excluded.sign_count)",
                (credential_id, count),
            )

"""The web inbox's durable state in SQLite (``DIR/inbox.db``): sign-in sessions (with their CSRF token and expiry),
the WebAuthn challenges the inbox issued (each kept by its nonce until used once or expired: HATP-GW-67), and
each passkey credential's last sign count (HATP-GW-69). Times are RFC 3339 strings the caller computes on its
Clock. Knows nothing of WebAuthn beyond storing these."""

from __future__ import annotations

import json
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatp_mcp.store.sqlite import immediate, json_text, open_db

__all__ = ["INBOX_DB", "Enrolment", "InboxState", "Session"]

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
CREATE TABLE IF NOT EXISTS enrol_codes (
    code_hash TEXT PRIMARY KEY,
    human TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS enrolments (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    human TEXT NOT NULL,
    credential_id TEXT NOT NULL UNIQUE,
    public_key TEXT NOT NULL,
    registered_at TEXT NOT NULL,
    state TEXT NOT NULL,
    authorized_by TEXT NOT NULL DEFAULT 'unrecorded'
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


@dataclass(frozen=True, slots=True)
class Enrolment:
    """A passkey registered in the inbox, waiting for the operator to put it on the card (HATP-GW-71)."""

    seq: int
    human: str
    credential_id: str
    public_key: str  # COSE key, base64url
    registered_at: str
    state: str  # pending | approved | refused
    # how the registration was allowed (HATP-GW-86): "code" (the operator's one-time code) or "passkey <id>" (a
    # fresh assertion of a passkey already on the card); "unrecorded" for one kept before this was recorded
    authorized_by: str = "unrecorded"


class InboxState:
    def __init__(self, path: str | Path) -> None:
        p = Path(path)
        if p.is_dir():
            p = p / INBOX_DB
        self._conn = open_db(p)
        self._lock = threading.Lock()
        self._conn.executescript(_SCHEMA)
        columns = {str(row[1]) for row in self._conn.execute("PRAGMA table_info(enrolments)")}
        if "authorized_by" not in columns:  # an inbox.db kept before enrolments said how they were allowed
            self._conn.execute("ALTER TABLE enrolments ADD COLUMN authorized_by TEXT NOT NULL DEFAULT 'unrecorded'")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _tx(self) -> AbstractContextManager[None]:
        return immediate(self._conn, self._lock)

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
        self, nonce: str, purpose: str, human: str | None, payload: dict[str, Any], expires_at: str, now: str = ""
    ) -> None:
        """Keep a challenge until it is taken or expires; challenges and sessions expired at `now` are purged
        (anyone may ask for a sign-in challenge: they must not pile up)."""
        with self._tx():
            if now:
                self._conn.execute("DELETE FROM challenges WHERE expires_at <= ?", (now,))
                self._conn.execute("DELETE FROM sessions WHERE expires_at <= ?", (now,))
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

    # -- enrolment (HATP-GW-71) --------------------------------------------------------------------------------

    def add_enrol_code(self, code_hash: str, human: str, expires_at: str) -> None:
        with self._tx():
            self._conn.execute(
                "INSERT INTO enrol_codes (code_hash, human, expires_at) VALUES (?, ?, ?)",
                (code_hash, human, expires_at),
            )

    def enrol_code(self, code_hash: str, now: str) -> str | None:
        """The person an unexpired code was issued for (the code stays until used)."""
        with self._lock:
            row = self._conn.execute(
                "SELECT human, expires_at FROM enrol_codes WHERE code_hash = ?", (code_hash,)
            ).fetchone()
        return str(row[0]) if row and row[1] > now else None

    def register(
        self, code_hash: str | None, human: str, credential_id: str, public_key: str, at: str, authorized_by: str
    ) -> int:
        """Record a verified registration as pending, with how it was allowed, and spend its code in the same write.
        Raises KeyError when the code was spent meanwhile, sqlite3.IntegrityError for a credential already
        registered."""
        with self._tx():
            if code_hash is not None:
                cur = self._conn.execute(
                    "DELETE FROM enrol_codes WHERE code_hash = ? AND human = ?", (code_hash, human)
                )
                if cur.rowcount != 1:
                    raise KeyError(code_hash)
            cur = self._conn.execute(
                "INSERT INTO enrolments (human, credential_id, public_key, registered_at, state, authorized_by)"
                " VALUES (?, ?, ?, ?, 'pending', ?)",
                (human, credential_id, public_key, at, authorized_by),
            )
            return int(cur.lastrowid or 0)

    def enrolments(self, state: str | None = None) -> list[Enrolment]:
        sql = "SELECT seq, human, credential_id, public_key, registered_at, state, authorized_by FROM enrolments"
        args: tuple[str, ...] = (state,) if state else ()
        with self._lock:
            rows = self._conn.execute(sql + (" WHERE state = ?" if state else "") + " ORDER BY seq", args).fetchall()
        return [Enrolment(*r) for r in rows]

    def settle_enrolment(self, seq: int, state: str) -> None:
        with self._tx():
            self._conn.execute("UPDATE enrolments SET state = ? WHERE seq = ? AND state = 'pending'", (state, seq))

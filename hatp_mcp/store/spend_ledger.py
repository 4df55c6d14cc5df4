"""The proxy's spend ledger (spec/proxy.md HATP-PXY-23): what each agent's gated calls took, per currency, so a
budget over a window holds across restarts. SQLite, every write committed before it returns.

A row is written (reserved) before anyone is asked and removed when the call is refused, rejected or expires: so
two calls asked for at once cannot both fit a budget only one fits, and a reservation a crash left behind still
counts until its window passes (fail closed).
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import datetime
from decimal import Decimal
from pathlib import Path

from hatp_mcp.core.model.base import format_ts

__all__ = ["SpendLedger"]


class SpendLedger:
    """Spends by agent and currency, each under a key (the call's digest and a round). `path` ':memory:' for tests."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS spend (key TEXT PRIMARY KEY, agent TEXT NOT NULL, currency TEXT NOT NULL, "
            "amount TEXT NOT NULL, at TEXT NOT NULL)"
        )

    def spent(self, agent: str, currency: str, since: datetime) -> Decimal:
        """The sum of `agent`'s spends (and reservations) in `currency` at or after `since`."""
        with self._lock:
            rows = self._db.execute(
                "SELECT amount FROM spend WHERE agent = ? AND currency = ? AND at >= ?",
                (agent, currency, format_ts(since)),
            ).fetchall()
        return sum((Decimal(r[0]) for r in rows), Decimal(0))

    def reserve(self, key: str, agent: str, currency: str, amount: Decimal, at: datetime) -> None:
        """Record a spend under `key` (durable when this returns). Raises sqlite3.IntegrityError for a used key."""
        with self._lock:
            self._db.execute(
                "INSERT INTO spend (key, agent, currency, amount, at) VALUES (?, ?, ?, ?, ?)",
                (key, agent, currency, format(amount, "f"), format_ts(at)),
            )

    def release(self, key: str) -> None:
        """Remove the spend under `key`: its call did not go upstream."""
        with self._lock:
            self._db.execute("DELETE FROM spend WHERE key = ?", (key,))

    def close(self) -> None:
        with self._lock:
            self._db.close()

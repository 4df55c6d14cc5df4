"""The proxy's shadow log (spec/proxy.md HATP-PXY-40, 41): in shadow mode, each call the policy would have refused
(hidden, denied, gated, over a gate's maximum or a budget) is written here, with the rule, before the call is
forwarded. SQLite, every write committed before it returns; entries are only ever added.

An entry holds what the operator needs to judge the policy (when, which tool, its policy, the refusal's rule,
code, reason and path) and the digest of the call's arguments, never the arguments themselves.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

__all__ = ["ShadowLog"]


class ShadowLog:
    """What shadow mode let through. `path` ':memory:' for tests."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS shadow (id INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL)"
        )

    def record(self, entry: dict[str, Any]) -> int:
        """Append one entry (durable when this returns); its id."""
        text = json.dumps(entry, sort_keys=True, separators=(",", ":"))
        with self._lock:
            cur = self._db.execute("INSERT INTO shadow (entry) VALUES (?)", (text,))
        return int(cur.lastrowid or 0)

    def entries(self) -> list[dict[str, Any]]:
        """Every entry, oldest first, each with its `id`."""
        with self._lock:
            rows = self._db.execute("SELECT id, entry FROM shadow ORDER BY id").fetchall()
        return [{"id": row[0], **json.loads(row[1])} for row in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()

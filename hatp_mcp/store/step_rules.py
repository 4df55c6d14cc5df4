"""Which policy rule each of the proxy's journaled steps was journaled under (spec/proxy.md HATP-PXY-44): its
action and the undo and lookup calls of the policy then in force, by the step's idempotency key. SQLite, every
write committed before it returns; a rule once written is never changed.

The journal keeps a step's arguments and result; the undo's arguments are built from them at rollback by the
rule's expressions. Keeping the rule here lets a rollback after a reload, or after a restart with another file,
undo the step as it was journaled.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

__all__ = ["StepRules"]


class StepRules:
    """Rules by step key. `path` ':memory:' for tests."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE IF NOT EXISTS step_rule (key TEXT PRIMARY KEY, rule TEXT NOT NULL)")

    def record(self, key: str, rule: dict[str, Any]) -> None:
        """Keep `rule` for the step `key` (durable when this returns); a key already kept keeps its rule."""
        text = json.dumps(rule, sort_keys=True, separators=(",", ":"))
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO step_rule (key, rule) VALUES (?, ?)", (key, text))

    def get(self, key: str) -> dict[str, Any] | None:
        """The rule kept for `key`, or None."""
        with self._lock:
            row = self._db.execute("SELECT rule FROM step_rule WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        rule: dict[str, Any] = json.loads(row[0])
        return rule

    def close(self) -> None:
        with self._lock:
            self._db.close()

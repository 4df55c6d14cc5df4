"""Where proxies before this one kept the policy rule of each journaled step (spec/proxy.md HATP-PXY-44):
`DATA/step-rules.db`, by the step's idempotency key. Read only, so that a step journaled by such a proxy is still
undone (and looked up) as it was journaled after an upgrade. The rule now rides in the step's own `step.started`
entry, in the one durable write that journals the step (HATP-JRN-25): nothing writes this file any more.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

__all__ = ["StepRules"]


class StepRules:
    """Rules by step key, as an older proxy kept them. `open` gives None where there is no such file."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True, check_same_thread=False)

    @classmethod
    def open(cls, path: Path) -> StepRules | None:
        """The file at `path` opened read only, or None when there is none (nothing journaled before the move)."""
        return cls(path) if path.is_file() else None

    def get(self, key: str) -> dict[str, Any] | None:
        """The rule kept for `key`, or None (none kept, or a file that holds no rules)."""
        with self._lock:
            try:
                row = self._db.execute("SELECT rule FROM step_rule WHERE key = ?", (key,)).fetchone()
            except sqlite3.OperationalError:  # (no table: a file that never held a rule)
                return None
        if row is None:
            return None
        rule: dict[str, Any] = json.loads(row[0])
        return rule

    def close(self) -> None:
        with self._lock:
            self._db.close()

"""One problem found in a Transaction Record: where, which rule, why. Pure data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Problem"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a record: the event index (-1 for the record itself), the rule and why."""

    index: int
    rule: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "rule": self.rule, "reason": self.reason}

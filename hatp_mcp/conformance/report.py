"""The conformance report: one result per check (rule id, sent, expected, got, passed), as text or JSON.

A check that could not be made (an earlier step it depends on failed) is `skipped`, never passed: the report's
verdict is a pass only when every check ran and passed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CheckResult", "Report", "Verdict"]

Verdict = Literal["pass", "fail", "skipped"]


@dataclass(frozen=True)
class CheckResult:
    rule: str  # the spec rule id the check holds the server to, e.g. HATP-TRUST-1
    name: str  # what the check is, one sentence
    sent: str  # what was sent, one line
    expected: str
    got: str
    verdict: Verdict

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "check": self.name,
            "sent": self.sent,
            "expected": self.expected,
            "got": self.got,
            "verdict": self.verdict,
        }


@dataclass
class Report:
    target: str  # the command or URL checked
    role: str  # participant | gateway
    results: list[CheckResult] = field(default_factory=list)

    def add(self, result: CheckResult) -> None:
        self.results.append(result)

    @property
    def ok(self) -> bool:
        """Every check ran and passed (a skipped check is not a pass; no checks at all is not a pass)."""
        return bool(self.results) and all(r.verdict == "pass" for r in self.results)

    def failed_rules(self) -> list[str]:
        """The rule ids of the checks that failed, in order, each once."""
        return _unique(r.rule for r in self.results if r.verdict == "fail")

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "fail": 0, "skipped": 0}
        for r in self.results:
            out[r.verdict] += 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "role": self.role,
            "ok": self.ok,
            "counts": self.counts(),
            "failedRules": self.failed_rules(),
            "checks": [r.to_json() for r in self.results],
        }

    def to_text(self) -> str:
        lines = [f"hatp conformance {self.role}: {self.target}"]
        for r in self.results:
            mark = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP"}[r.verdict]
            lines.append(f"{mark} {r.rule}: {r.name}")
            if r.verdict != "pass":
                lines.append(f"     sent:     {r.sent}")
                lines.append(f"     expected: {r.expected}")
                lines.append(f"     got:      {r.got}")
        c = self.counts()
        verdict = "conforms" if self.ok else "does NOT conform"
        lines.append(f"{c['pass']} passed, {c['fail']} failed, {c['skipped']} skipped: the server {verdict}")
        if self.failed_rules():
            lines.append("failed rules: " + ", ".join(self.failed_rules()))
        return "\n".join(lines)


def _unique(items: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen

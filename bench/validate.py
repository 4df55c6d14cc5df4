"""`hatp validate` throughput on the typical trip plan, beside the same-run cost of just parsing it.

Goal (bench/_report.py, `full_plans`): plans/s by CPU for the whole check (schema parse + every HATP-VAL rule).
Its floor is pydantic parsing the same plan, in the same interleaved rounds: no check can be faster than the parse
it starts with, so a goal above the parse's own rate is a bench error.

Run: `.venv/bin/python -m bench.validate`
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import _report as report
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.saga import validate_saga
from hatp_mcp.core.validate.validator import validate, validate_document

FIXTURES = Path(__file__).resolve().parents[1] / "spec" / "fixtures"
NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)


def main() -> int:
    doc = json.loads((FIXTURES / "hatp" / "trip.valid.json").read_text())
    saga = json.loads((FIXTURES / "saga" / "supplier-onboarding.valid.json").read_text())
    assert validate_document(doc, NOW).ok and not validate_saga(saga, NOW)
    plan = Plan.model_validate(doc)
    number, n_rounds = report.rounds(2000, 50), report.rounds(7, 2)
    got = report.interleaved(
        {
            "parse": lambda: Plan.model_validate(doc),
            "whole": lambda: validate_document(doc, NOW),
            "begin": lambda: _validated_and_digested(doc),
            "rules": lambda: validate(plan, NOW),
            "saga": lambda: validate_saga(saga, NOW),
        },
        number,
        n_rounds,
    )
    parse, whole = got["parse"], got["whole"]
    print(
        f"validate the trip plan ({len(plan.branches)} branches, {len(plan.approvals)} approval), per call, "
        f"median (range) over {n_rounds} interleaved rounds of {number}"
    )
    print(f"  parse only (baseline, Plan.model_validate)  {parse.show()}")
    fresh = whole.cpu.median - parse.cpu.median  # the rules on a plan just parsed: beyond the parse
    print(
        f"  HATP-VAL rules on a freshly parsed plan     CPU {report.sig(fresh * 1e6, 2)} us (parse + rules minus parse)"
    )
    print(f"  aside: the rules again on one Plan object   {got['rules'].show()}  (its cached sums already computed)")
    print(f"  parse + rules (validate_document)           {whole.show()}")
    print(f"  parse + rules + digest (what a begin pays)  {got['begin'].show()}")
    print(f"  6-step saga (parse + rules), {report.build()}  {got['saga'].show()}")
    ratios = report.Spread.of(w / p for w, p in zip(whole.cpu.samples, parse.cpu.samples, strict=True))
    print(f"  whole check / parsing alone, by CPU per round: {ratios.show(unit='x')}")
    print(f"  plans/s by wall {whole.wall.map(lambda s: 1 / s).show(unit='/s')} (the machine's load, not the code)")
    report.record(
        "full_plans",
        whole.cpu.map(lambda s: 1 / s),
        parse.cpu.map(lambda s: 1 / s),
        note="by CPU; the wall figure moves with the neighbours' load",
    )
    _long_sagas(saga)
    return 0


def _validated_and_digested(doc: dict[str, Any]) -> str:
    """What a begin computes from the plan: validate_document proves the canonical form without hashing it
    (HATP-CANON-2); a begin then needs the digest itself, once."""
    plan = Plan.model_validate(doc)
    assert not validate(plan, NOW)
    return plan.digest()


def _long_saga(template: dict[str, Any], n: int) -> dict[str, Any]:
    """n compensable steps, each with an undo window every later step blows, then an unbounded pivot: the
    undo-ttl check's worst case (every window reported, every message explaining a long sum)."""
    step = {"tool": "t.do", "class": "compensable", "compensation": {"tool": "t.undo"}, "maxDurationSeconds": 10}
    sid = template["sagaId"]
    steps = [{**step, "id": f"k{i}", "idempotencyKey": f"{sid}:k{i}", "undoTtlSeconds": 1} for i in range(n)]
    steps.append({"id": "p", "tool": "t.pay", "class": "irreversible", "idempotencyKey": f"{sid}:p"})
    return {**template, "steps": steps, "pivotIndex": n, "mandate": {**template["mandate"], "maxSpendEur": 1}}


def _long_sagas(template: dict[str, Any]) -> None:
    """Linear work and output in the number of steps (HATP-SAGA-5): the cost per step at 50,000 steps against the
    same at 10,000, measured in the same run. Goal: at most 2x (a quadratic check gives 5x); allocation and garbage
    collection over 18 MB of messages keep it above 1x."""
    per_step: dict[int, float] = {}
    small, large = (1_000, 5_000) if report.QUICK else (10_000, 50_000)
    for n in (small, large):
        doc = _long_saga(template, n)
        best, size = float("inf"), 0
        for _ in range(3):
            start = time.perf_counter()
            violations = validate_saga(doc, NOW)
            best = min(best, time.perf_counter() - start)
            size = sum(len(v.message) for v in violations)
        per_step[n] = best / n
        print(f"  saga with {n:,} steps: {best * 1e3:7.1f} ms, {len(violations):,} violations, {size / 1e6:.1f} MB")
    ratio = per_step[large] / per_step[small]
    verdict = "met" if ratio <= 2.0 else "NOT met"
    print(f"  cost per step at {large:,} steps / at {small:,}: {ratio:.2f}x  (goal <= 2x, linear: {verdict})")


if __name__ == "__main__":
    raise SystemExit(report.alone("validate", main))

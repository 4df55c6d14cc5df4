"""canonical() against the reference rfc8785.dumps on a realistic 2-3 KB trip plan (goal: at least 10x faster),
and on a saga step holding floats, the same value through the fast path with floats against the same run's no-float
fast path on that value with its floats written as integers (goal: at most 2x: floats close to the fast path).

Run: `.venv/bin/python -m bench.canonical`
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import rfc8785

from bench._timing import versus
from hatp_mcp.core.model import Plan
from hatp_mcp.core.signing.canonical import canonical, canonical_exact
from tests.factories import trip_plan_json

GOAL = 10.0
FLOAT_GOAL = 2.0
SAGA = Path(__file__).resolve().parents[1] / "spec" / "fixtures" / "saga" / "supplier-onboarding.valid.json"


def _as_ints(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _as_ints(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_as_ints(v) for v in x]
    return int(x) if isinstance(x, float) else x


def main() -> int:
    plan = Plan.model_validate(trip_plan_json()).wire()
    size = len(canonical(plan))
    assert canonical(plan) == rfc8785.dumps(plan), "canonical() must be byte-identical to RFC 8785"
    ours, ref, ratio = versus(lambda: canonical(plan), lambda: rfc8785.dumps(plan))
    print(f"canonical JSON of a {size}-byte trip plan")
    print(f"  rfc8785.dumps (baseline) {ref * 1e6:8.1f} us/op")
    print(f"  hatp canonical()         {ours * 1e6:8.1f} us/op")
    verdict = "met" if ratio >= GOAL else "NOT met"
    print(f"  speed-up (median of paired rounds): {ratio:.1f}x  (goal >= {GOAL:.0f}x: {verdict})")

    sagas = json.loads(SAGA.read_text())
    steps = sagas["steps"]
    ints = _as_ints(steps)
    assert canonical(steps, allow_floats=True) == rfc8785.dumps(steps) == canonical_exact(steps, allow_floats=True)
    floats, no_floats, slower = versus(lambda: canonical(steps, allow_floats=True), lambda: canonical(ints))
    exact, _, _ = versus(lambda: canonical_exact(steps, allow_floats=True), lambda: canonical(ints))
    print(f"canonical JSON of a saga's {len(steps)} steps holding floats ({len(canonical(ints))} bytes)")
    print(f"  fast path, floats as integers (baseline) {no_floats * 1e6:7.1f} us/op")
    print(f"  fast path with floats                    {floats * 1e6:7.1f} us/op")
    print(f"  exact (pure Python) path                 {exact * 1e6:7.1f} us/op")
    cost = 1 / slower
    verdict = "met" if cost <= FLOAT_GOAL else "NOT met"
    goal = f"goal <= {FLOAT_GOAL:.0f}x: {verdict}"
    print(f"  floats cost {cost:.2f}x the no-float fast path (median of paired rounds; {goal})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

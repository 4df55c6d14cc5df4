"""canonical() against the reference rfc8785.dumps on a realistic 2-3 KB trip plan. Goal: at least 10x faster.

Run: `.venv/bin/python -m bench.canonical`
"""

from __future__ import annotations

import rfc8785

from bench._timing import versus
from hatp_mcp.core.evidence.canonical import canonical
from hatp_mcp.core.model import Plan
from tests.factories import trip_plan

GOAL = 10.0


def main() -> int:
    plan = Plan.model_validate(trip_plan()).wire()
    size = len(canonical(plan))
    assert canonical(plan) == rfc8785.dumps(plan), "canonical() must be byte-identical to RFC 8785"
    ours, ref, ratio = versus(lambda: canonical(plan), lambda: rfc8785.dumps(plan))
    print(f"canonical JSON of a {size}-byte trip plan")
    print(f"  rfc8785.dumps (baseline) {ref * 1e6:8.1f} us/op")
    print(f"  hatp canonical()         {ours * 1e6:8.1f} us/op")
    verdict = "met" if ratio >= GOAL else "NOT met"
    print(f"  speed-up (median of paired rounds): {ratio:.1f}x  (goal >= {GOAL:.0f}x: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

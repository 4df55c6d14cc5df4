"""canonical() against the reference rfc8785.dumps on a realistic 2-3 KB trip plan (goal: at least 10x faster),
and on a saga step holding floats, the same value through the fast path with floats against the same run's no-float
fast path on that value with its floats written as integers (goal: at most 2x: floats close to the fast path).
Then what compiling canonical.py (setup.py, mypyc) buys, the reason it is compiled: the digest of each event of a
signed trip record (what a coordinator and `hatp verify` compute per event), the module as built against its own
source loaded as plain Python, interleaved rounds.

Run: `.venv/bin/python -m bench.canonical`
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import rfc8785

from bench import _report as report
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing import canonical as canonical_module
from hatp_mcp.core.signing.canonical import canonical, canonical_exact
from tests.compiled import build_state, load_as_python
from tests.factories import signed_trip_record, trip_plan_json

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
    number, n_rounds = report.rounds(2000, 50), report.rounds(7, 2)
    plan = Plan.model_validate(trip_plan_json()).wire()
    size = len(canonical(plan))
    assert canonical(plan) == rfc8785.dumps(plan), "canonical() must be byte-identical to RFC 8785"
    got = report.interleaved({"ours": lambda: canonical(plan), "ref": lambda: rfc8785.dumps(plan)}, number, n_rounds)
    speedup = _ratios(got["ref"], got["ours"])
    print(f"canonical JSON of a {size}-byte trip plan, per call, median (range) over {n_rounds} interleaved rounds")
    print(f"  rfc8785.dumps (baseline) {got['ref'].show()}")
    print(f"  hatp canonical()         {got['ours'].show()}")
    verdict = "met" if speedup.median >= GOAL else "NOT met"
    print(f"  speed-up by CPU, per round: {speedup.show(unit='x')}  (goal >= {GOAL:.0f}x: {verdict})")

    sagas = json.loads(SAGA.read_text())
    steps = sagas["steps"]
    ints = _as_ints(steps)
    assert canonical(steps, allow_floats=True) == rfc8785.dumps(steps) == canonical_exact(steps, allow_floats=True)
    got = report.interleaved(
        {
            "ints": lambda: canonical(ints),
            "floats": lambda: canonical(steps, allow_floats=True),
            "exact": lambda: canonical_exact(steps, allow_floats=True),
        },
        number,
        n_rounds,
    )
    print(f"canonical JSON of a saga's {len(steps)} steps holding floats ({len(canonical(ints))} bytes)")
    print(f"  fast path, floats as integers (baseline) {got['ints'].show()}")
    print(f"  fast path with floats                    {got['floats'].show()}")
    print(f"  exact (pure Python) path                 {got['exact'].show()}")
    cost = _ratios(got["floats"], got["ints"])
    verdict = "met" if cost.median <= FLOAT_GOAL else "NOT met"
    print(f"  floats cost the no-float fast path's, by CPU per round: {cost.show(unit='x')} (goal <= 2x: {verdict})")
    _compiled_gain(number // 10 or 1, n_rounds)
    return 0


def _compiled_gain(number: int, n_rounds: int) -> None:
    """The compiled module's digest of each event of a signed trip record against its source run as Python."""
    state = build_state(canonical_module)
    events = signed_trip_record("txn-bench-canonical")[0]["events"]
    print(f"digest() of each of a signed trip record's {len(events)} events, canonical.py as built: {state}")
    if state != "compiled":
        print("  nothing compiled to compare (setup.py found no C compiler, or the build is older than the source)")
        return
    python = load_as_python(canonical_module, "canonical_as_python")
    built, plain = canonical_module.digest, python.digest
    assert [built(e) for e in events] == [plain(e) for e in events]
    got = report.interleaved(
        {"compiled": lambda: [built(e) for e in events], "python": lambda: [plain(e) for e in events]},
        number,
        n_rounds,
    )
    print(f"  its source as Python (baseline) {got['python'].show()}")
    print(f"  compiled (mypyc)                {got['compiled'].show()}")
    print(f"  compiled gain by CPU, per round: {_ratios(got['python'], got['compiled']).show(unit='x')}")


def _ratios(a: report.Timings, b: report.Timings) -> report.Spread:
    """a's CPU per call over b's, round by round."""
    return report.Spread.of(x / y for x, y in zip(a.cpu.samples, b.cpu.samples, strict=True))


if __name__ == "__main__":
    raise SystemExit(report.alone("canonical", main))

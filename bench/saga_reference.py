"""`validate_saga` against the saga validator it is compared with: apology-protocol's own `validatePlan` in Node,
on that project's own fixture plans, both sides parsing and checking the same parsed JSON in process, pinned to
one core and run in interleaved rounds (the Node side waits on stdin for each of its rounds).

The reference is not on npm and is not part of this repository: set HATP_SAGA_REFERENCE to a built copy
(`git clone https://github.com/valeriouberti/apology-protocol && cd apology-protocol && npm ci && npm run build`).
Without it this prints "reference not available" and hatp's own figure on spec/fixtures/saga.

Goal (#19): hatp faster than the reference, i.e. hatp time / reference time below 1.

Run: `HATP_SAGA_REFERENCE=/path/to/apology-protocol .venv/bin/python -m bench.saga_reference`

On a shared, loaded machine the rounds spread several-fold on both sides, by CPU time as much as by wall clock
(the other processes share more than the core's time slices), so there the deterministic figure is a count of
instructions. `--passes N` runs hatp alone, one warm-up pass and then N passes over the reference's plans, nothing
else: `PYTHONHASHSEED=0 valgrind --tool=callgrind .venv/bin/python -m bench.saga_reference --passes N` with N = 0
and N = 100; (the difference of the two totals) / (100 x 13) is what one plan costs, whatever the load.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import _report as report
from hatp_mcp.core.validate.saga import validate_saga

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 8, 11, 9, tzinfo=UTC)  # the instant the reference's own tests validate at
ROUNDS = 15
ROUND_SECONDS = 0.05


def _reference_plans(ref: Path) -> list[Any]:
    files = sorted((ref / "test" / "fixtures").glob("*.json")) + sorted((ref / "examples").glob("*.json"))
    return [json.loads(f.read_text()) for f in files]


def _own_plans() -> list[Any]:
    return [json.loads(f.read_text()) for f in sorted((ROOT / "spec" / "fixtures" / "saga").glob("*.json"))]


def _hatp_round(plans: list[Any], passes: int) -> float:
    """Nanoseconds per plan over `passes` passes."""
    start = time.perf_counter_ns()
    for _ in range(passes):
        for p in plans:
            validate_saga(p, NOW)
    return (time.perf_counter_ns() - start) / (passes * len(plans))


def _passes(plans: list[Any]) -> int:
    per_plan = _hatp_round(plans, 20) * 1e-9
    return max(1, int(ROUND_SECONDS / (per_plan * len(plans))))


def _pin() -> int | None:
    """Pin this process to one core it may use (the last), and return it; None where affinity is not offered."""
    try:
        cpu = max(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return cpu
    except (AttributeError, OSError):
        return None


def _count(passes: int) -> int:
    """One warm-up pass and `passes` passes of validate_saga over the reference's plans, for callgrind."""
    ref_dir = os.environ.get("HATP_SAGA_REFERENCE")
    if ref_dir is None:
        print("--passes needs HATP_SAGA_REFERENCE (the reference's plans are what is counted)", file=sys.stderr)
        return 2
    plans = _reference_plans(Path(ref_dir))
    _hatp_round(plans, 1)
    if passes:
        _hatp_round(plans, passes)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = argv or []  # bench.run calls main() with none
    if len(argv) == 2 and argv[0] == "--passes" and argv[1].isdigit():
        return _count(int(argv[1]))
    if argv:
        print(__doc__)
        return 0 if argv[0] in ("-h", "--help") else 2
    cpu = _pin()
    ref_dir = os.environ.get("HATP_SAGA_REFERENCE")
    node = shutil.which("node")
    built = ref_dir is not None and (Path(ref_dir) / "dist" / "index.js").is_file()
    if not built or node is None:
        plans = _own_plans()
        ns = statistics.median(_hatp_round(plans, _passes(plans)) for _ in range(5))
        why = "HATP_SAGA_REFERENCE is not set" if ref_dir is None else f"no built copy at {ref_dir} (or no node)"
        print(f"reference not available ({why}); see this module's docstring for how to build one")
        print(
            f"  hatp validate_saga ({report.build()}) on spec/fixtures/saga ({len(plans)} plans): "
            f"{ns / 1e3:.1f} us/plan"
        )
        return 0
    assert ref_dir is not None
    plans = _reference_plans(Path(ref_dir))
    child = subprocess.Popen(
        [node, str(ROOT / "bench" / "saga_reference.mjs"), ref_dir, NOW.isoformat().replace("+00:00", "Z")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        for p in plans:
            child.stdin.write(json.dumps(p) + "\n")
        child.stdin.write("\n")
        child.stdin.flush()
        theirs = json.loads(child.stdout.readline())
        ours = [not validate_saga(p, NOW) for p in plans]
        passes = _passes(plans)

        def reference_round() -> float:
            child.stdin.write(f"{passes}\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
            return float(child.stdout.readline().split()[0])  # type: ignore[union-attr]

        reference_round()  # warm the JIT
        _hatp_round(plans, passes)
        hatp_ns, ref_ns, ratios = [], [], []
        for i in range(report.rounds(ROUNDS, 3)):
            if i % 2:  # alternate which side goes first
                r, h = reference_round(), _hatp_round(plans, passes)
            else:
                h, r = _hatp_round(plans, passes), reference_round()
            hatp_ns.append(h)
            ref_ns.append(r)
            ratios.append(h / r)
    finally:
        child.stdin.close()
        child.wait(timeout=10)
    agree = sum(a == b for a, b in zip(ours, theirs, strict=True))
    ratio = report.Spread.of(ratios)
    print(
        f"saga validation on the reference's own {len(plans)} plans (parse + rules), one core, {len(ratios)} "
        f"interleaved rounds, median (range); hatp's build: {report.build()}"
    )
    print(f"  same verdict (valid or not) on {agree} of {len(plans)} plans")
    print(f"  reference validatePlan (Node {_node_version(node)})  {report.Spread.of(ref_ns).show(1e-3, 'us/plan')}")
    print(f"  hatp validate_saga                       {report.Spread.of(hatp_ns).show(1e-3, 'us/plan')}")
    print(f"  hatp / reference: {ratio.show(unit='x')}")
    report.record("saga_reference", ratio, None, note=report.build())
    return 0


def _node_version(node: str) -> str:
    return subprocess.run([node, "--version"], capture_output=True, text=True, check=False).stdout.strip()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

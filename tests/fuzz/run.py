"""`make fuzz`: every fuzz target on N hostile inputs (default 100,000), with counts per target: inputs, clean
refusals, accepted, crashes. Exit 1 when any target crashed (the first few crashes are printed).

Run: `.venv/bin/python -m tests.fuzz.run [--examples N] [--only NAME]`
"""

from __future__ import annotations

import argparse
import time
import traceback
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.inputs import INPUTS
from tests.fuzz.targets import TARGETS


def _run(name: str, examples: int) -> tuple[Counter[str], list[str]]:
    target, kind = TARGETS[name]
    counts: Counter[str] = Counter()
    crashes: list[str] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(INPUTS[kind])
    def one(value: Any) -> None:
        counts["inputs"] += 1
        try:
            counts[target(value)] += 1
        except Exception:  # a crash is what we count here; the run goes on to find the others
            counts["crashes"] += 1
            if len(crashes) < 3:
                crashes.append(f"{value!r:.200}\n{traceback.format_exc(limit=3)}")

    one()
    return counts, crashes


def main() -> int:
    p = argparse.ArgumentParser(prog="tests.fuzz.run")
    p.add_argument("--examples", type=int, default=100_000)
    p.add_argument("--only", action="append", choices=sorted(TARGETS))
    args = p.parse_args()
    print(f"{'target':32} {'inputs':>9} {'refused':>9} {'accepted':>9} {'crashes':>8} {'seconds':>8}")
    failed = False
    for name in args.only or sorted(TARGETS):
        start = time.perf_counter()
        counts, crashes = _run(name, args.examples)
        took = time.perf_counter() - start
        print(
            f"{name:32} {counts['inputs']:>9,} {counts['refused']:>9,} {counts['accepted']:>9,} "
            f"{counts['crashes']:>8,} {took:>8.1f}",
            flush=True,
        )
        for c in crashes:
            print("  crash:", c.replace("\n", "\n    "))
        failed = failed or counts["crashes"] > 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`hatp validate FILE` from a cold start, beside the import of the modules validation needs, in the same rounds.

A command-line check is mostly start-up: the interpreter, then the imports. The floor is a fresh interpreter that
imports exactly the modules `hatp validate` uses (hatp_mcp.cli.validate_cmd's own imports) and does nothing else:
no version of the CLI starts faster while validation needs those modules. A bare `python -c pass` is printed
beside them. Each round runs the three one after another, in turn leading; wall time of each process, and its CPU
(the children's user + system time).

Goal `cli_start` (bench/_report.py): the whole command at most a multiple of that floor.

Run: `.venv/bin/python -m bench.cli [ROUNDS]`
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

from bench import _report as report

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "spec" / "fixtures" / "hatp" / "trip.valid.json"
NEEDED = (  # what hatp_mcp/cli/validate_cmd.py imports, and the CLI's entry it is reached through
    "hatp_mcp.cli",
    "hatp_mcp.cli._run",
    "hatp_mcp.core.model.plan",
    "hatp_mcp.core.validate.clockfit",
    "hatp_mcp.core.validate.validator",
    "hatp_mcp.runtime.clock",
)
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "import what validation needs": [sys.executable, "-c", "import " + ", ".join(NEEDED)],
    "hatp validate FILE": [sys.executable, "-m", "hatp_mcp.cli", "validate", str(PLAN)],
}


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process (its exit status is not the bench's concern: a verdict on the plan)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=60, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rounds = int(args[0]) if args and args[0].isdigit() else report.rounds(10, 2)
    names = list(COMMANDS)
    for name in names:  # warm the file cache and the bytecode
        _run(COMMANDS[name])
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            w, c = _run(COMMANDS[name])
            wall[name].append(w)
            cpu[name].append(c)
    print(f"a cold start, median (range) over {rounds} interleaved rounds, each a fresh process")
    for name in names:
        w_s, c_s = report.Spread.of(wall[name]), report.Spread.of(cpu[name])
        print(f"  {name:30s} wall {w_s.show(1e3, 'ms')}, CPU {c_s.show(1e3, 'ms')}")
    per_round = report.Spread.of(
        a / b for a, b in zip(wall["hatp validate FILE"], wall["import what validation needs"], strict=True)
    )
    print(f"  hatp validate FILE / the imports alone, per round: {per_round.show(unit='x')}")
    report.record(
        "cli_start",
        report.Spread.of(wall["hatp validate FILE"]).map(lambda s: s * 1e3),
        report.Spread.of(wall["import what validation needs"]).map(lambda s: s * 1e3),
        note="wall",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(report.alone("cli", main))

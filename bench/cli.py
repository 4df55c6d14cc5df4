"""`hatp validate FILE` and `hatp verify RECORD --keys FILE` from a cold start, each beside the import of the modules
it needs, in the same rounds.

A command-line check is mostly start-up: the interpreter, then the imports. Each command's floor is a fresh
interpreter that imports exactly the modules its subcommand module imports at its top (read from its source, with
the CLI's entry and runner it is reached through) and does nothing else: no version of the command starts faster
while it needs those modules. What a subcommand needs only in one mode (`hatp verify --org`'s organisation files,
a passkey's WebAuthn check, a form question's JSON Schema) is imported where that mode runs, so neither side pays
for it; tests/cli/test_imports.py holds each command to its floor's modules. A bare `python -c pass` is printed
beside them. Each round runs every process one after another, in turn leading; wall time of each process, and its
CPU (the children's user + system time). `hatp verify` checks a signed 17-event trip record
(tests.factories.signed_trip_record), written with its keyring to a temporary directory.

Goals `cli_start` and `cli_verify` (bench/_report.py): each command at most a multiple of its floor.

Run: `.venv/bin/python -m bench.cli [ROUNDS]`
"""

from __future__ import annotations

import ast
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import _report as report
from tests.factories import signed_trip_record

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "spec" / "fixtures" / "hatp" / "trip.valid.json"
ENTRY = ("hatp_mcp.cli", "hatp_mcp.cli._run")  # what every subcommand is reached through


@dataclass(frozen=True, slots=True)
class Check:
    """One subcommand timed against the import of what it needs: its goal, its module, its arguments."""

    goal: str
    module: str
    argv: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"hatp {self.argv[0]}"

    def needed(self) -> tuple[str, ...]:
        """The modules the subcommand needs at its start: the CLI's entry and runner, and every module its own
        module imports at its top (imports inside a function are a mode's, made where that mode runs)."""
        tree = ast.parse(Path(ROOT, *self.module.split(".")).with_suffix(".py").read_text())
        found: list[str] = []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module != "__future__":
                found.append(node.module)
            elif isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
        return tuple(dict.fromkeys([*ENTRY, *found]))


def checks(data: Path) -> list[Check]:
    """The subcommands timed, their inputs written to `data`: the trip plan, a signed trip record and its keys."""
    record, ring, _ = signed_trip_record("txn-bench-cli")
    (data / "record.json").write_text(json.dumps(record))
    (data / "keys.json").write_text(json.dumps(ring.to_jwks()))
    return [
        Check("cli_start", "hatp_mcp.cli.validate_cmd", ("validate", str(PLAN))),
        Check(
            "cli_verify",
            "hatp_mcp.cli.verify_cmd",
            ("verify", str(data / "record.json"), "--keys", str(data / "keys.json")),
        ),
    ]


def _run(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process (its exit status is not the bench's concern: a verdict on the plan)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=60, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _shown(argv: tuple[str, ...]) -> list[str]:
    """A command's arguments as printed: file names without their (temporary) directories."""
    return [Path(a).name if "/" in a else a for a in argv]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    rounds = int(args[0]) if args and args[0].isdigit() else report.rounds(10, 2)
    with tempfile.TemporaryDirectory() as tmp:
        timed = checks(Path(tmp))
        commands = {"python -c pass": [sys.executable, "-c", "pass"]}
        pairs: list[tuple[Check, str, str]] = []  # each check, its floor's name and its command's
        for check in timed:
            floor, command = f"import what {check.name} needs", " ".join((check.name, *_shown(check.argv[1:])))
            commands[floor] = [sys.executable, "-c", "import " + ", ".join(check.needed())]
            commands[command] = [sys.executable, "-m", "hatp_mcp.cli", *check.argv]
            pairs.append((check, floor, command))
        names = list(commands)
        for name in names:  # warm the file cache and the bytecode
            _run(commands[name])
        wall: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                w, c = _run(commands[name])
                wall[name].append(w)
                cpu[name].append(c)
    print(f"a cold start, median (range) over {rounds} interleaved rounds, each a fresh process")
    for name in names:
        w_s, c_s = report.Spread.of(wall[name]), report.Spread.of(cpu[name])
        print(f"  {name:42s} wall {w_s.show(1e3, 'ms')}, CPU {c_s.show(1e3, 'ms')}")
    for check, floor, command in pairs:
        per_round = report.Spread.of(a / b for a, b in zip(wall[command], wall[floor], strict=True))
        print(f"  {check.name} / the imports alone, per round: {per_round.show(unit='x')}")
        report.record(
            check.goal,
            report.Spread.of(wall[command]).map(lambda s: s * 1e3),
            report.Spread.of(wall[floor]).map(lambda s: s * 1e3),
            note="wall",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(report.alone("cli", main))

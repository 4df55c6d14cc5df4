"""Run every benchmark module in bench/ that exists (`make bench`), then print one table of every goal.

`--quick` asks each bench for a few rounds (enough to exercise it, too few to quote); `--only NAME[,NAME]` runs
those benches alone. The table lists each goal the benches recorded beside the floor the same run computed
(bench/_report.py); the exit status is 1 when any goal lies beyond its floor (a bench error).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import bench
from bench import _report


def names() -> list[str]:
    """The benches `make bench` runs: every module in bench/ not starting with `_`, and not this one."""
    found = [m.name for m in pkgutil.iter_modules(bench.__path__)]
    return sorted(n for n in found if not n.startswith("_") and n != "run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few rounds per bench: exercises, does not measure")
    parser.add_argument("--only", default="", help="comma-separated bench names (e.g. validate,canonical)")
    args = parser.parse_args(argv)
    chosen = names()
    if args.only:
        wanted = [n.strip().removeprefix("bench.") for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(chosen))
        if unknown:
            parser.error(f"no such bench: {', '.join(unknown)} (there are: {', '.join(chosen)})")
        chosen = [n for n in chosen if n in wanted]
    _report.QUICK = args.quick
    _report.clear()
    sys.argv[1:] = []  # each bench's main() reads its own arguments from sys.argv when given none
    for name in chosen:
        print(f"== bench.{name}")
        module = importlib.import_module(f"bench.{name}")
        started = _report.header(name)
        module.main()
        _report.footer(started)
        print()
    found = _report.rows()
    ran = {f"bench.{n}" for n in chosen}
    recorded = {r.key for r in found}
    missing = [(k, "no figure") for k, g in _report.GOALS.items() if g.bench in ran and k not in recorded]
    missing += [
        (k, "not run" if g.bench[6:] in names() else "no bench yet")
        for k, g in _report.GOALS.items()
        if g.bench not in ran
    ]
    quick = " (--quick: too few rounds to quote)" if args.quick else ""
    print(f"== goals, each beside the floor the same run computed{quick}")
    print(_report.table(found, missing))
    errors = [r.key for r in found if r.verdict is _report.Verdict.ERROR]
    if errors:
        print(f"bench error: goal beyond the floor this run computed: {', '.join(errors)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

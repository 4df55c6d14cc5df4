"""The mutation run: switch off each rule's check, by its rule id, and run the tests that plant its violation.

For every rule the spec defines (`make mutation`, or `--rules HATP-TXN-2 ...`): the sites tests/mutation/sites.py
finds for that id are rewritten in a copy of the repository (the working tree is never touched, and the package
gains no switch), and the test functions that name the rule (spec/violations.md's mapping, tests/violations_appendix)
run against the copy. At least one of them must fail: the mutant is *killed*. If all pass, the check *survived*:
no planted violation notices it is gone. A few tests of other rules checked in the same files run too (`others
failed`): they are expected to pass, and one that fails shows the switch reached past this rule, or that another
rule's case depends on this check as well. A rule with no site (`no-site`) or no test (`no-test`) is never counted
as killed.

Prints a table and, with `--write`, writes it to spec/mutation.md (rows of the rules run replace their old rows).
Exits 1 when a rule that is not exempt (tests/mutation/exemptions.py) survives or a run breaks. `--each-site`
switches each site off alone instead (a stricter look: which sites no test needs), and only prints.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.mutation.exemptions import EXEMPT
from tests.mutation.sites import ROOT, Site, Sites, find_sites, mutate
from tests.test_spec_rules import spec_rules
from tests.violations_appendix import planted

TABLE = ROOT / "spec" / "mutation.md"
CONTROLS = 3  # other rules' tests run beside each rule's own
TIMEOUT = 900.0  # seconds for one rule's run; a hang counts as a failure of the run, never as killed
COPIED = ("hatp_mcp", "tests", "servers", "demo", "spec", "bench", "pyproject.toml", "README.md", "Makefile")
# a compiled module (*.so, setup.py) would run instead of its mutated .py: the copy runs the sources as Python
SKIP = shutil.ignore_patterns("__pycache__", "node_modules", ".venv", "*.pyc", "*.so")

__all__ = ["Outcome", "main", "read_rows", "run_each_site", "run_rules", "write_table"]


@dataclass
class Outcome:
    """One rule's row."""

    rule: str
    sites: list[Site] = field(default_factory=list)
    tests: int = 0
    result: str = ""  # killed | survived | no-site | no-test | error
    ran: int = 0
    killer: str = ""
    others_run: int = 0
    others_failed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    detail: str = ""

    def cells(self) -> dict[str, str]:
        """The row's cells, but for the static `reports not switchable` (write_table fills it from the code)."""
        kinds = sorted({s.kind for s in self.sites})
        result = "exempt: survived" if self.result == "survived" and self.rule in EXEMPT else self.result
        return {
            "rule": self.rule,
            "sites switched off": f"{len(self.sites)} ({', '.join(kinds)})" if self.sites else "0",
            "tests naming it": str(self.tests),
            "tests run": str(self.ran or ""),
            "result": result,
            "killed by": f"`{self.killer}`" if self.killer else "",
            "others failed": f"{len(self.others_failed)}/{self.others_run}" if self.others_run else "",
        }

    def row(self) -> str:
        return _row(self.cells())


COLUMNS = (
    "rule",
    "sites switched off",
    "reports not switchable",
    "tests naming it",
    "tests run",
    "result",
    "killed by",
    "others failed",
)


def _row(cells: dict[str, str]) -> str:
    return "| " + " | ".join(cells.get(c, "") for c in COLUMNS) + " |"


@contextmanager
def _copy() -> Iterator[Path]:
    """A throwaway copy of the repository the tests can run in (what make installs there linked, not copied)."""
    with tempfile.TemporaryDirectory(prefix="hatp-mutation-") as tmp:
        dst = Path(tmp) / "repo"
        dst.mkdir()
        for name in COPIED:
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, dst / name, ignore=SKIP)
            elif src.exists():
                shutil.copy2(src, dst / name)
        # what make installs beside the sources: the TypeScript client, the npm servers, the clients' own venv, axe-core
        for installed in (
            "tests/e2e/ts/node_modules",
            "tests/e2e/npm_servers/node_modules",
            "tests/e2e/clients/.venv",
            "tests/web/axe/node_modules",
        ):
            if (ROOT / installed).exists():
                (dst / installed).symlink_to(ROOT / installed)
        yield dst


def _forget_bytecode(path: Path) -> None:
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink()


def _controls(rule: str, sites: Sites, tests: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """Up to CONTROLS tests of other rules checked in the same files, none of which names `rule` (fast ones first)."""
    files = {s.path for s in sites.sites.get(rule, [])}
    mine = set(tests.get(rule, []))
    candidates: set[tuple[str, str]] = set()
    for other, found in sites.sites.items():
        if other != rule and files & {s.path for s in found}:
            candidates.update(t for t in tests.get(other, []) if t not in mine)
    return sorted(candidates, key=lambda t: ("/e2e/" in t[0], "/core/" not in t[0], t))[:CONTROLS]


def _run_one(repo: Path, outcome: Outcome, own: list[tuple[str, str]], controls: list[tuple[str, str]]) -> None:
    by_file: dict[str, list[Site]] = {}
    for s in outcome.sites:
        by_file.setdefault(s.path, []).append(s)
    originals = {rel: (repo / rel).read_text() for rel in by_file}
    started = time.monotonic()
    try:
        for rel, sites in by_file.items():
            text = mutate(originals[rel], sites)
            compile(text, rel, "exec")
            (repo / rel).write_text(text)
            _forget_bytecode(repo / rel)
        out = repo / "result.json"
        out.unlink(missing_ok=True)
        plan = repo / "plan.json"
        plan.write_text(json.dumps({"own": own, "controls": controls, "out": str(out)}))
        files = sorted({f for f, _ in own + controls})
        env = {**os.environ, "PYTHONPATH": str(repo), "HATP_MUTATION_PLAN": str(plan)}
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.mutation.plugin", *files]
        done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
        if not out.exists():
            outcome.result, outcome.detail = "error", (done.stdout + done.stderr)[-2000:]
            return
        got = json.loads(out.read_text())
        outcome.ran = len(got["own_run"])
        outcome.others_run, outcome.others_failed = len(got["controls_run"]), got["controls_failed"]
        if got["own_failed"]:
            outcome.result, outcome.killer = "killed", got["own_failed"][0]
        elif outcome.ran == 0:
            outcome.result, outcome.detail = "error", "none of the rule's tests ran: " + done.stdout[-1500:]
        else:
            outcome.result = "survived"
    except subprocess.TimeoutExpired:
        outcome.result, outcome.detail = "error", f"the run took more than {TIMEOUT:.0f} s"
    except SyntaxError as exc:
        outcome.result, outcome.detail = "error", f"the mutant does not compile: {exc}"
    finally:
        for rel, text in originals.items():
            (repo / rel).write_text(text)
            _forget_bytecode(repo / rel)
        outcome.seconds = time.monotonic() - started


def run_rules(rules: Sequence[str], jobs: int = 2, progress: bool = True) -> list[Outcome]:
    """Each rule's outcome, all its sites switched off together, run `jobs` at a time (each worker in its own copy
    of the repository)."""
    sites = find_sites()
    tests = planted()
    outcomes = [Outcome(r, sites.sites.get(r, []), len(set(tests.get(r, [])))) for r in rules]
    _run_all(outcomes, sites, tests, jobs, progress)
    return outcomes


def run_each_site(rules: Sequence[str], jobs: int = 2, progress: bool = True) -> list[Outcome]:
    """One outcome per site of each rule, switched off alone: shows a site that no test needs even where another
    site of the same rule kills the rule's mutant."""
    sites = find_sites()
    tests = planted()
    outcomes = [Outcome(r, [site], len(set(tests.get(r, [])))) for r in rules for site in sites.sites.get(r, [])]
    _run_all(outcomes, sites, tests, jobs, progress)
    return outcomes


def _run_all(
    outcomes: list[Outcome], sites: Sites, tests: dict[str, list[tuple[str, str]]], jobs: int, progress: bool
) -> None:
    todo: list[Outcome] = []
    for o in outcomes:
        if not o.sites:
            o.result = "no-site"
        elif not o.tests:
            o.result = "no-test"
        else:
            todo.append(o)
    # the rules with the most tests first, so a long one does not start last
    todo.sort(key=lambda o: -o.tests)
    lock = threading.Lock()
    free: list[Path] = []
    with _copies(min(jobs, len(todo))) as repos:
        free.extend(repos)

        def work(o: Outcome) -> None:
            with lock:
                repo = free.pop()
            try:
                own = [list(t) for t in sorted(set(tests[o.rule]))]
                _run_one(repo, o, own, [list(t) for t in _controls(o.rule, sites, tests)])
            finally:
                with lock:
                    free.append(repo)
            if progress:
                where = o.sites[0].label() if len(o.sites) == 1 else f"{len(o.sites)} sites"
                others = f", others failed: {o.others_failed}" if o.others_failed else ""
                print(
                    f"{o.rule} ({where}): {o.result} ({o.ran} run, {o.seconds:.1f} s{others}) {o.killer}"
                    f"{o.detail[:200]}",
                    flush=True,
                )

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(work, todo))


@contextmanager
def _copies(n: int) -> Iterator[list[Path]]:
    with ExitStack() as stack:
        yield [stack.enter_context(_copy()) for _ in range(n)]


HEADER = """# Appendix: the mutation run (generated)

Informative. For every rule the spec defines: its check switched off by its rule id (the sites
tests/mutation/sites.py finds where the code reports that id, each rewritten so the check never fires, in a copy
of the repository), and whether the test functions that name the rule (spec/violations.md) notice. `killed`: at
least one of them fails with the check off. `survived`: all of them pass, so no planted violation shows the check
is needed (allowed only with a reason in tests/mutation/exemptions.py). `no-site`: no place in the code reports the
id (a rule kept by construction, by ordering or by another rule's check), so nothing was switched off: never
counted as killed. A report `not switchable` computes a value the code goes on to use (`kid = _verify(...)`), so
it stays on. `others failed`: of a few tests of other rules checked in the same files, how many failed too.

Written by `make mutation` (tests/mutation/run.py); `--rules ID ...` re-runs and rewrites only those rows. A test
fails when the rule list or the number of sites here differs from the code's, or when a rule survives unexempted.

"""


def read_rows(path: Path = TABLE) -> dict[str, dict[str, str]]:
    """rule -> its row in the committed table, by column."""
    if not path.exists():
        return {}
    rows: dict[str, dict[str, str]] = {}
    names: list[str] = []
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| rule |"):
            names = [{"sites (kinds)": "sites switched off"}.get(n, n) for n in cells]  # the first table's name
        elif line.startswith("| HATP-"):
            rows[cells[0]] = dict(zip(names, cells, strict=True))
    return rows


def write_table(outcomes: Sequence[Outcome], sites: Sites, path: Path = TABLE) -> str:
    """The table with these outcomes' rows replaced, in the spec's order (rows of rules no longer defined are
    dropped); `reports not switchable` is read from the code for every row. Returns the summary line."""
    rows = read_rows(path)
    rows.update({o.rule: o.cells() for o in outcomes})
    rules = list(spec_rules())
    lines = []
    counts = dict.fromkeys(("killed", "survived", "exempt: survived", "no-site", "no-test"), 0)
    for r in rules:
        cells = rows.get(r, {"rule": r, "result": "not run"})
        cells["reports not switchable"] = str(len(sites.unmutable.get(r, [])))
        if cells["result"] in counts:
            counts[cells["result"]] += 1
        lines.append(_row(cells))
    summary = (
        f"{len(rules)} rules: {counts['killed']} killed, {counts['survived']} survived, "
        f"{counts['exempt: survived']} survived with an exemption, {counts['no-site']} with no site, "
        f"{counts['no-test']} with no test naming them, {len(rules) - sum(counts.values())} not run or broken."
    )
    header = "| " + " | ".join(COLUMNS) + " |\n" + "|---" * len(COLUMNS) + "|\n"
    path.write_text(HEADER + header + "\n".join(lines) + "\n\n" + summary + "\n")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests.mutation.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--rules", nargs="*", help="rule ids (default: every rule the spec defines)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--write", action="store_true", help=f"write the rows to {TABLE.relative_to(ROOT)}")
    p.add_argument(
        "--each-site", action="store_true", help="switch each site off alone and print which ones no test needs"
    )
    args = p.parse_args(argv)
    defined = list(spec_rules())
    rules = args.rules or defined
    unknown = sorted(set(rules) - set(defined))
    if unknown:
        print(f"not rules the spec defines: {', '.join(unknown)}", file=sys.stderr)
        return 2
    started = time.monotonic()
    if args.each_site:
        each = run_each_site(rules, jobs=args.jobs)
        for o in each:
            print(f"| {o.rule} | {o.sites[0].label()} | {o.result} | {o.killer} |")
        alive = sum(1 for o in each if o.result == "survived")
        print(f"{len(each)} sites in {time.monotonic() - started:.0f} s: {alive} no test needs", file=sys.stderr)
        return 1 if any(o.result == "error" for o in each) else 0
    outcomes = run_rules(rules, jobs=args.jobs)
    print("| " + " | ".join(COLUMNS) + " |")
    for o in outcomes:
        print(o.row())
    bad = [o for o in outcomes if o.result == "error" or (o.result == "survived" and o.rule not in EXEMPT)]
    for o in bad:
        print(f"{o.rule}: {o.result}: {o.detail or 'no test that names it fails with its check off'}", file=sys.stderr)
        for s in o.sites:
            print(f"  switched off: {s.label()}", file=sys.stderr)
    counts = {
        k: sum(1 for o in outcomes if o.result == k) for k in ("killed", "survived", "no-site", "no-test", "error")
    }
    print(
        f"{len(outcomes)} rules in {time.monotonic() - started:.0f} s: "
        + ", ".join(f"{v} {k}" for k, v in counts.items())
    )
    if args.write:
        print(write_table(outcomes, find_sites()))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""spec/violations.md, generated from the tests: for every rule the spec defines, the test functions that break it
on purpose (a test function names the rule in its name or in a string it asserts or sends; a mention in a comment
or a module docstring does not count), so the appendix cannot drift from what the suite runs.

`python -m tests.violations_appendix --write` (`make violations`); `--check` exits 1 on drift (a test runs it).
A rule no test function names is listed as such: the appendix shows the gap instead of hiding it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.test_spec_rules import DEFINE, REFERENCE

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "spec" / "violations.md"


def _sentence(name: str) -> str:
    words = REFERENCE.sub("", name.removeprefix("test_")).replace("_", " ").split()
    return " ".join(words)


def planted(root: Path = ROOT) -> dict[str, list[tuple[str, str]]]:
    """rule id -> [(test file, test function)], from every test function's name and string constants."""
    found: dict[str, list[tuple[str, str]]] = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        if path.name in ("test_spec_rules.py", "test_violations_appendix.py"):
            continue
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.name.startswith("test"):
                continue
            rules = {r.replace("_", "-") for r in REFERENCE.findall(node.name)}
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    rules.update(r.replace("_", "-") for r in REFERENCE.findall(sub.value))
            for rule in rules:
                found.setdefault(rule, []).append((rel, node.name))
    return found


def generated() -> str:
    tests = planted()
    lines = [
        "# Appendix: the planted violations (generated)",
        "",
        "Informative. For every rule the spec defines, the tests that break it on purpose and assert the refusal",
        "and the evidence it leaves, named as behaviour sentences. Generated from the test functions by",
        "`make violations` (tests/violations_appendix.py); a test fails when this file drifts from the suite. A rule",
        "is credited to a test only when the test function itself names it (in its name, or in a string it asserts",
        "or sends), never for a mention in a comment.",
        "",
    ]
    gaps: list[str] = []
    for path in sorted((ROOT / "spec").glob("*.md")):
        if path.name == OUT.name:
            continue
        rules = DEFINE.findall(path.read_text())
        if not rules:
            continue
        lines += [f"## {path.name}", ""]
        for rule in rules:
            cases = sorted(set(tests.get(rule, [])))
            if not cases:
                gaps.append(rule)
                lines.append(f"- **{rule}**: no test function names it (tested through helpers or only mentioned)")
                continue
            lines.append(f"- **{rule}** ({len(cases)})")
            lines += [f"  - {_sentence(name)} (`{file}`)" for file, name in cases]
        lines.append("")
    lines += [f"Rules no test function names: {len(gaps)}" + (f" ({', '.join(gaps)})." if gaps else "."), ""]
    return "\n".join(lines).replace("- **", "- `").replace("**", "`")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests.violations_appendix")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true")
    group.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    text = generated()
    if args.write:
        OUT.write_text(text)
        print(f"wrote {OUT.relative_to(ROOT)}")
        return 0
    if not OUT.exists() or OUT.read_text() != text:
        print(f"{OUT.relative_to(ROOT)} drifted from the tests: run `make violations`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

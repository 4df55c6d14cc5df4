"""Every rule id the spec defines is referenced by a test, and every id a test references is defined.

A test references a rule by naming it, as `HATP-SIG-3` or, in a function name, `HATP_SIG_3`.

A rule is defined in spec/*.md by a list item that starts with its id in bold: `- **HATP-SIG-3** ...`.

Naming is the weak half: tests/mutation/test_table.py asks, for every rule whose check the code reports, for a test
that fails when that check is switched off (spec/mutation.md, `make mutation`).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFINE = re.compile(r"^\s*[-*]\s+\*\*(HATP-[A-Z]+-\d+)\*\*", re.MULTILINE)
REFERENCE = re.compile(r"HATP[-_][A-Z]+[-_]\d+")  # test names spell ids with underscores


def spec_rules() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / "spec").glob("*.md")):
        for rule in DEFINE.findall(path.read_text()):
            found.setdefault(rule, []).append(path.name)
    return found


def referenced_rules() -> set[str]:
    refs: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name == "test_spec_rules.py":
            continue
        refs.update(r.replace("_", "-") for r in REFERENCE.findall(path.read_text()))
    return refs


def test_the_spec_defines_rules_each_exactly_once() -> None:
    rules = spec_rules()
    assert len(rules) >= 20
    twice = {r: files for r, files in rules.items() if len(files) > 1}
    assert not twice, f"rules defined more than once: {twice}"


def test_every_spec_rule_is_exercised_by_some_test() -> None:
    missing = sorted(set(spec_rules()) - referenced_rules())
    assert not missing, f"spec rules no test references: {missing}"


def test_every_rule_a_test_names_is_defined_in_the_spec() -> None:
    undefined = sorted(referenced_rules() - set(spec_rules()))
    assert not undefined, f"tests reference rules the spec does not define: {undefined}"

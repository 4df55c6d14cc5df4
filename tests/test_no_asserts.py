"""No `assert` guards a path of hatp_mcp: `python -O` strips them, and where they stay a broken expectation ends a
request with a bare AssertionError instead of a refusal that names its rule. Read from the syntax tree, so a
string or a comment that says "assert" is not counted and an assert on any line is."""

from __future__ import annotations

import ast
from pathlib import Path

import hatp_mcp

PACKAGE = Path(hatp_mcp.__file__).parent


def asserts_in(source: str, name: str) -> list[int]:
    """The line numbers of the assert statements in `source`."""
    return [node.lineno for node in ast.walk(ast.parse(source, name)) if isinstance(node, ast.Assert)]


def test_no_assert_statement_guards_a_path_of_hatp_mcp() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in asserts_in(path.read_text(encoding="utf-8"), str(path))
    ]
    assert found == [], f"replace these asserts with a refusal (HatpError) or an explicit error: {found}"


def test_the_scan_finds_an_assert_on_any_line_and_not_the_word_in_a_string() -> None:
    planted = 'def f(x):\n    """assert x"""\n    if x:\n        assert x is not None, "x"\n    return "assert"\n'
    assert asserts_in(planted, "planted.py") == [4]

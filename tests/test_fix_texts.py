"""HATP-MCP-56: a refusal's fix is something its reader can do; it never names a path in this repository
(`spec/...`, `hatp_mcp/...`), which a model or an operator of an installed package cannot open. Checked over every
fix given in the package and the servers: a `fix=` argument, a `fix` variable, and the fix argument of the local
refusal helpers (`_bad(path, reason, fix)`)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO_PATHS = ("spec/", "hatp_mcp/", "servers/", "tests/")
HELPERS = ("_bad", "_refuse", "refuse", "_problem")


def fixes_naming_repository_paths(source: str, name: str) -> list[str]:
    """Every fix text in `source` that names a repository path, as `name:line: text`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        texts: list[ast.expr] = []
        if isinstance(node, ast.Call):
            texts += [kw.value for kw in node.keywords if kw.arg == "fix"]
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in HELPERS and len(node.args) >= 3:
                texts.append(node.args[2])
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "fix" for t in node.targets):
            texts.append(node.value)
        for text in texts:
            segment = ast.get_source_segment(source, text) or ""
            if any(p in segment for p in REPO_PATHS):
                found.append(f"{name}:{text.lineno}: {segment[:120]}")
    return found


def test_HATP_MCP_56_no_fix_names_a_repository_path() -> None:
    found = []
    for path in [*(ROOT / "hatp_mcp").rglob("*.py"), *(ROOT / "servers").rglob("*.py")]:
        found += fixes_naming_repository_paths(path.read_text(), str(path.relative_to(ROOT)))
    assert found == [], "\n".join(found)


def test_HATP_MCP_56_the_check_finds_a_planted_repository_path_in_each_form() -> None:
    planted = (
        'raise HatpError("R", "why", fix="see spec/gateway.md")\n'
        "fix = 'see hatp_mcp/core/journal/undo_map.py'\n"
        'raise _bad("$", "why", "see spec/gateway.md, Delivery")\n'
        'raise HatpError("R", "why", fix="write an object")\n'
    )
    assert sorted(f.split(":")[1] for f in fixes_naming_repository_paths(planted, "planted")) == ["1", "2", "3"]

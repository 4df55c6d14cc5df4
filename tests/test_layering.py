"""The core is sans-IO: nothing under hatp_mcp/core imports IO, clocks, transports or the runtime."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "hatp_mcp" / "core"
FORBIDDEN = {
    "anyio",
    "asyncio",
    "mcp",
    "sqlite3",
    "os",
    "time",
    "socket",
    "subprocess",
    "threading",
    "pathlib",
    "trio",
    "hatp_mcp.store",
    "hatp_mcp.runtime",
    "hatp_mcp.mcp",
    "hatp_mcp.cli",
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_core_modules_import_no_io_clock_or_transport() -> None:
    offenders = {}
    files = sorted(CORE.rglob("*.py"))
    assert files
    for path in files:
        bad = {m for m in imported_modules(path) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)}
        if bad:
            offenders[str(path.relative_to(CORE))] = sorted(bad)
    assert not offenders, f"core modules doing IO: {offenders}"


def test_core_never_reads_the_clock() -> None:
    for path in sorted(CORE.rglob("*.py")):
        text = path.read_text()
        assert ".now(" not in text and "utcnow(" not in text, f"{path.name} reads the clock; take `now` instead"

"""The core reads no clock. What it may import is checked by import-linter (see tests/test_import_contracts.py)."""

from __future__ import annotations

from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "hatp_mcp" / "core"


def test_core_never_reads_the_clock() -> None:
    for path in sorted(CORE.rglob("*.py")):
        text = path.read_text()
        assert ".now(" not in text and "utcnow(" not in text, f"{path.name} reads the clock; take `now` instead"

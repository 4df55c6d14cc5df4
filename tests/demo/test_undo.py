"""`make demo-undo` end to end: real shop and journal processes, a return undone by MCP calls, then a journal
killed mid-rollback that finishes on restart; both records verify (the demo exits 1 if anything is off)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_the_undo_demo_undoes_the_return_and_recovers_a_killed_rollback_HATP_JRN_10() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "demo.undo"], cwd=ROOT, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.count("effects on #88") == 2 and out.count("['mark', 'refund', 'unrefund', 'unmark']") == 2
    assert "SIGKILL the journal" in out and "3 undo attempt(s)" in out
    assert out.count("the journal record holds offline") == 2
    assert "HATP-JRN-13 SHELL_REFUSED" in out
    assert "without the agent's token is refused: HATP-JRN-17 CALLER_UNPROVEN" in out

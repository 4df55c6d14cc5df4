"""The import contracts in pyproject.toml (import-linter, run by `make lint`) hold, and fail when a cycle is planted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT), "--no-cache", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "hatp_mcp", tmp_path / "hatp_mcp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_every_import_contract(tmp_path: Path) -> None:
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_planted_cycle_between_two_runtime_modules_breaks_the_lint(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    clock = tree / "hatp_mcp" / "runtime" / "clock.py"
    clock.write_text(clock.read_text() + "\nfrom hatp_mcp.runtime.coordinator import driver as _planted  # noqa\n")
    result = _lint(tree)
    assert result.returncode == 1
    assert "No import cycles anywhere in hatp_mcp BROKEN" in result.stdout
    assert "hatp_mcp.runtime" in result.stdout


def test_signing_importing_the_transaction_machine_breaks_the_core_layers(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    canonical = tree / "hatp_mcp" / "core" / "signing" / "canonical.py"
    canonical.write_text(canonical.read_text() + "\nimport hatp_mcp.core.txn.machine  # noqa\n")
    result = _lint(tree)
    assert result.returncode == 1
    assert "The core's parts: the transaction on top, signing at the bottom BROKEN" in result.stdout
    assert "hatp_mcp.core.signing.canonical -> hatp_mcp.core.txn.machine" in result.stdout


def test_a_phase_step_reaching_back_to_the_machine_breaks_the_machine_layers(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    abort = tree / "hatp_mcp" / "core" / "txn" / "abort.py"
    abort.write_text(abort.read_text() + "\nimport hatp_mcp.core.txn.machine  # noqa\n")
    result = _lint(tree)
    assert result.returncode == 1
    assert "The txn machine: handle, then the phases, their steps, the data BROKEN" in result.stdout
    assert "hatp_mcp.core.txn.abort -> hatp_mcp.core.txn.machine" in result.stdout


def test_the_core_importing_a_clock_module_breaks_the_no_io_contract(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    money = tree / "hatp_mcp" / "core" / "model" / "money.py"
    money.write_text(money.read_text() + "\nimport time  # noqa\n")
    result = _lint(tree)
    assert result.returncode == 1
    assert "The core does no IO, reads no clock and knows no transport BROKEN" in result.stdout

"""Each subcommand starts with what it uses alone: `hatp validate FILE` builds and imports only its own module, and
no subcommand but `conformance`, which checks a server over MCP, imports the MCP SDK on its start. `connect`
relays MCP, but loads the SDK only once it has started the service it may need (beside that start, not before it:
the first bridge of a stopped service is within a client's connect timeout)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hatp_mcp.cli import COMMANDS

NEEDS_MCP = {"conformance"}  # conformance checks a server over MCP


def _modules_after(argv: list[str]) -> set[str]:
    code = (
        "import json, sys\n"
        "from hatp_mcp.cli import main\n"
        f"main({argv!r})\n"
        "sys.stdout.write('\\n' + json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - NEEDS_MCP))
def test_a_subcommand_that_speaks_no_mcp_never_imports_the_mcp_sdk(name: str) -> None:
    loaded = _modules_after([name, "--help"])
    assert f"hatp_mcp.cli.{COMMANDS[name]}" in loaded
    assert "mcp" not in loaded, f"hatp {name} imports the MCP SDK"


def test_the_check_sees_the_mcp_sdk_where_a_subcommand_does_import_it() -> None:
    assert "mcp" in _modules_after(["conformance", "--help"])


def test_running_one_subcommand_imports_no_other_subcommands_module() -> None:
    loaded = _modules_after(["digest", "--help"])
    others = {f"hatp_mcp.cli.{m}" for n, m in COMMANDS.items() if n != "digest"}
    assert not (loaded & others), sorted(loaded & others)


def test_hatp_help_still_lists_every_subcommand() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hatp_mcp.cli", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0
    for name in COMMANDS:
        assert name in out.stdout

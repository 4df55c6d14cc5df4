"""Each subcommand starts with what it uses alone: `hatp validate FILE` builds and imports only its own module, and
no subcommand but `conformance`, which checks a server over MCP, imports the MCP SDK on its start. `connect`
relays MCP, but loads the SDK only once it has started the service it may need (beside that start, not before it:
the first bridge of a stopped service is within a client's connect timeout). `hatp validate FILE` and `hatp verify
RECORD --keys FILE` load no module beyond what bench.cli's floor for them imports, and none of what only another mode
needs (WebAuthn, JSON Schema, the stores)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.cli import Check, checks
from hatp_mcp.cli import COMMANDS

NEEDS_MCP = {"conformance"}  # conformance checks a server over MCP


def _modules_after(argv: list[str]) -> set[str]:
    return _loaded(f"from hatp_mcp.cli import main\nmain({argv!r})")


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - NEEDS_MCP))
def test_a_subcommand_that_speaks_no_mcp_never_imports_the_mcp_sdk(name: str) -> None:
    loaded = _modules_after([name, "--help"])
    assert f"hatp_mcp.cli.{COMMANDS[name].module}" in loaded
    assert "mcp" not in loaded, f"hatp {name} imports the MCP SDK"


def test_the_check_sees_the_mcp_sdk_where_a_subcommand_does_import_it() -> None:
    assert "mcp" in _modules_after(["conformance", "--help"])


def test_running_one_subcommand_imports_no_other_subcommands_module() -> None:
    loaded = _modules_after(["digest", "--help"])
    others = {f"hatp_mcp.cli.{c.module}" for n, c in COMMANDS.items() if n != "digest"}
    assert not (loaded & others), sorted(loaded & others)


def test_the_bridge_a_client_starts_loads_no_part_of_the_service_it_relays_to() -> None:
    """`hatp connect` is started by every client session (and per call by a client that starts a process per
    call): it reads the service's folder, lock and status, never `hatp serve`'s own module (its children, policies
    and coordinator settings)."""
    loaded = _modules_after(["connect", "--help"])
    assert "hatp_mcp.cli.connect_cmd" in loaded
    assert "hatp_mcp.cli.serve_cmd" not in loaded and "hatp_mcp.core.txn.data" not in loaded


@pytest.mark.parametrize("argv", [["--help"], ["no-such-command"], []])
def test_hatp_help_a_typo_or_nothing_imports_no_subcommands_module(argv: list[str]) -> None:
    loaded = _modules_after(argv)
    assert {f"hatp_mcp.cli.{c.module}" for c in COMMANDS.values()} & loaded == set()


def test_hatp_help_still_lists_every_subcommand() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hatp_mcp.cli", "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0
    text = " ".join(out.stdout.split())  # argparse wraps the lines of help
    for name, command in COMMANDS.items():
        assert name in text and command.help in text


# What checking a plan or a record with --keys never needs: WebAuthn (a passkey proof, checked only with --org),
# JSON Schema (a form question), JMESPath (the proxy's policies), the stores, the MCP SDK.
NOT_FOR_A_CHECK = {"webauthn", "OpenSSL", "cbor2", "jsonschema", "jmespath", "sqlite3", "psycopg", "mcp"}


def _loaded(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code`."""
    code += "\nimport json, sys\nsys.stdout.write('\\n' + json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _after_check(check: Check) -> set[str]:
    """The modules loaded once `check`'s command has run and succeeded (exit 0: the plan valid, the record sound)."""
    loaded = _loaded(f"from hatp_mcp.cli import main\nassert main({list(check.argv)!r}) == 0, 'the check failed'")
    assert check.module in loaded
    return loaded


def _after_floor(check: Check) -> set[str]:
    return _loaded("import " + ", ".join(check.needed()))


def _outside_stdlib(modules: set[str]) -> set[str]:
    """hatp_mcp's modules and the top-level packages from outside the standard library."""
    return {m for m in modules if m.startswith("hatp_mcp")} | {
        m.split(".")[0] for m in modules if m.split(".")[0] not in sys.stdlib_module_names
    }


@pytest.mark.parametrize("goal", ["cli_start", "cli_verify"])
def test_a_check_loads_nothing_its_benchs_floor_does_not_import(goal: str, tmp_path: Path) -> None:
    """bench.cli times each command against importing its module's own imports: a module the command loads while it
    runs and the floor does not would be start-up the floor leaves out."""
    check = next(c for c in checks(tmp_path) if c.goal == goal)
    ran, floor = _after_check(check), _after_floor(check)
    assert _outside_stdlib(ran) - _outside_stdlib(floor) - {check.module} == set()


@pytest.mark.parametrize("goal", ["cli_start", "cli_verify"])
def test_checking_a_plan_or_a_record_with_keys_loads_no_webauthn_json_schema_store_or_sdk(
    goal: str, tmp_path: Path
) -> None:
    check = next(c for c in checks(tmp_path) if c.goal == goal)
    ran = _after_check(check)
    assert {m.split(".")[0] for m in ran} & NOT_FOR_A_CHECK == set()

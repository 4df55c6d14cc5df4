"""The suite driven from the official TypeScript MCP SDK (tests/e2e/ts/drive.mjs), a client nobody here wrote, over
stdio (the servers exactly as `hatp mcp-config` prints them) and streamable HTTP (the demo's seven processes):
initialize, list tools, read the example plan, see a refusal's reason in the tool result, approve through the
gateway with the person's own signature, see COMMITTED. Needs node and `make ts-client` (part of `make test`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from demo.trip_suite import ORG, open_seven

pytestmark = pytest.mark.anyio

TS = Path(__file__).resolve().parent / "ts"
HUMAN_KEYS = ORG / "test-only-keys" / "humans"
EXPECTED_TOOLS = {"abort_transaction", "begin_transaction", "list_pending", "transaction_status"}


def node() -> str:
    """The node binary and the installed SDK, or a failure saying how to get them (never a skip)."""
    found = shutil.which("node")
    if found is None or not (TS / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the TypeScript client is not installed: run `make ts-client` (needs node and npm)")
    return found


async def drive(settings: dict[str, Any]) -> dict[str, Any]:
    """Run drive.mjs (bounded) and return what it saw."""
    with anyio.fail_after(150):
        done = await anyio.run_process(
            [node(), str(TS / "drive.mjs"), json.dumps(settings)], cwd=TS, check=False, stderr=subprocess.PIPE
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    seen: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return seen


def check(seen: dict[str, Any]) -> None:
    assert EXPECTED_TOOLS <= set(seen["tools"]) and seen["hatpRoles"] == ["coordinator"]
    assert seen["planSchemaMembers"] >= 10  # the Plan schema, not an untyped object
    lines = seen["refusalText"].splitlines()
    assert seen["refusedIsError"] and lines[0].startswith("PLAN_INVALID: refused under HATP-TXN-1")
    assert any(x.startswith("- HATP-VAL-9 at deadlines.decideBy: ") and "in the future" in x for x in lines)
    assert seen["askState"] == "approved" and seen["approvedBy"].startswith("human://acme.com/")
    assert seen["outcome"] == "COMMITTED" and not seen["recordInStatus"]
    assert {r["result"] for r in seen["results"]} == {"committed", "approved"}
    assert seen["recordDigest"].startswith("sha256:") and seen["recordEvents"] > 10


async def test_the_typescript_sdk_drives_a_trip_to_committed_over_streamable_http(tmp_path: Path) -> None:
    node()
    async with AsyncExitStack() as stack:
        suite = await open_seven(stack, tmp_path)
        seen = await drive(
            {
                "transport": "http",
                "coordinator": {"url": suite.procs["coordinator"].url, "token": suite.procs["coordinator"].token},
                "gateway": {"url": suite.procs["gateway"].url},
                "txnId": "txn-ts-http",
                "humanKeys": str(HUMAN_KEYS),
                "progressCheck": True,
            }
        )
    check(seen)
    # HATP-MCP-32: a 21 s wait outlived the client's 15 s timeout on the server's progress notifications
    assert seen["progressNotifications"] >= 2 and seen["stateAfterLongWait"] == "approving"


async def test_the_typescript_sdk_drives_a_trip_to_committed_over_stdio_as_mcp_config_prints_it(
    tmp_path: Path,
) -> None:
    node()
    with anyio.fail_after(60):  # exactly what a user pastes into Claude Desktop
        printed = await anyio.run_process(
            [str(Path(sys.executable).parent / "hatp"), "mcp-config", "--data", str(tmp_path)], stderr=subprocess.PIPE
        )
    servers = json.loads(printed.stdout.decode())["mcpServers"]
    gateway = servers["hatp-gateway"]
    assert "--no-signing-tools" in gateway["args"]  # a chat app's model cannot sign a decision (HATP-MCP-57)
    # the driver also plays the people, with their keys: the client that signs is offered `decide`
    gateway = gateway | {"args": [a for a in gateway["args"] if a != "--no-signing-tools"]}
    seen = await drive(
        {
            "transport": "stdio",
            "coordinator": servers["hatp-coordinator"],
            "gateway": gateway,
            "txnId": "txn-ts-stdio",
            "humanKeys": str(HUMAN_KEYS),
            "progressCheck": False,
        }
    )
    check(seen)

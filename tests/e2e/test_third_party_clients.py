"""The proxy in front of server-memory (npm, nobody here wrote it), driven by Python MCP clients nobody here wrote
either: fastmcp's Client and PydanticAI's MCPToolset, each in the clients' own venv (tests/e2e/clients/.venv,
`make clients`, exact pins in tests/e2e/clients/requirements.txt) as a user's would be, run as subprocesses. Each
is given the Claude Desktop `mcpServers` block that `hatp mcp-config --org DIR --direct` prints for an organisation
that wrapped server-memory with `hatp org wrap` (HATP-MCP-58), so what a user pastes is what is tested."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from hatp_mcp.cli import main as hatp
from hatp_mcp.core.journal.proxy_tools import IRREVERSIBLE_NOTE
from hatp_mcp.runtime.service.supervisor import SERVICE_READY, service_folder
from tests.e2e.test_proxy_npm_servers import memory_policy, server
from tests.e2e.test_service_processes import make_org, start_service
from tests.readme_walkthrough import README, commands, run

pytestmark = [pytest.mark.e2e]

CLIENTS = Path(__file__).resolve().parent / "clients"
CLIENT_PYTHON = CLIENTS / ".venv" / "bin" / "python"


def run_client(script: str, *args: str) -> dict[str, Any]:
    """One client script in the clients' venv (never the project's): its one JSON line, or a failure with its
    stderr. A missing venv fails the test, never skips it."""
    if not (CLIENTS / ".venv" / ".installed").is_file():
        pytest.fail("the clients' venv is not installed: run `make clients`")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(
        [str(CLIENT_PYTHON), str(CLIENTS / script), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    value: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return value


def wrapped_memory(tmp: Path, memory: Path, tools: dict[str, Any] | None = None) -> Path:
    """An organisation that wraps server-memory as `memory`, and the Claude Desktop config holding only its
    `hatp-memory` entry as `hatp mcp-config --org DIR --direct` prints it."""
    layout = make_org(tmp)
    policy = memory_policy(memory)
    policy["tools"].update(tools or {})
    path = tmp / "memory-policy.json"
    path.write_text(json.dumps(policy))
    assert hatp(["org", "wrap", str(layout.root), "memory", str(path)]) == 0
    block = subprocess.run(
        [sys.executable, "-m", "hatp_mcp.cli", "mcp-config", "--org", str(layout.root), "--direct"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    entry = json.loads(block.stdout)["mcpServers"]["hatp-memory"]
    config = tmp / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"hatp-memory": entry}}))
    return config


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_fastmcp_client_journals_server_memory_and_its_rollback_leaves_the_file_byte_identical(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    config = wrapped_memory(tmp_path, memory)
    seen = run_client("fastmcp_memory.py", str(config), str(memory))
    assert {"create_entities", "add_observations", "saga_rollback"} <= set(seen["tools"])
    assert "delete_relations" not in seen["tools"]  # hidden
    assert not seen["create"]["isError"] and not seen["observe"]["isError"]
    assert seen["changed"] != seen["before"]
    denied = seen["denied"]
    assert denied["isError"] and denied["structured"]["refusal"]["code"] == "TOOL_DENIED"
    done = seen["rollback"]["structured"]
    assert done["sagaId"] == seen["begin"]["structured"]["sagaId"] and done["status"] == "ROLLED_BACK"
    assert [(s["tool"], s["state"]) for s in done["steps"]] == [
        ("create_entities", "ROLLED_BACK"),
        ("add_observations", "ROLLED_BACK"),
    ]
    assert sha256(memory) == seen["before"]


def test_pydantic_ai_toolset_lists_the_proxys_tools_as_its_policy_says_and_calls_one(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    config = wrapped_memory(tmp_path, memory, {"create_relations": {"policy": "irreversible"}})
    seen = run_client("pydantic_ai_tools.py", str(config), "hatp-memory")
    tools: dict[str, str] = seen["tools"]
    assert "delete_relations" not in tools  # hidden: absent from tools/list
    assert IRREVERSIBLE_NOTE in tools["create_relations"]
    assert IRREVERSIBLE_NOTE not in tools["create_entities"] and "saga_begin" in tools
    assert "carol" in json.dumps(seen["written"])
    assert '"carol"' in memory.read_text()  # the call reached server-memory through the proxy


@pytest.mark.anyio
async def test_HATP_MCP_59_the_service_runs_a_wrapped_server_that_fastmcp_reaches_by_bridge_and_by_url(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    layout = make_org(tmp_path)
    path = tmp_path / "memory-policy.json"
    path.write_text(json.dumps(memory_policy(memory)))
    assert hatp(["org", "wrap", str(layout.root), "memory", str(path)]) == 0
    block = await anyio.run_process([sys.executable, "-m", "hatp_mcp.cli", "mcp-config", "--org", str(layout.root)])
    printed = json.loads(block.stdout)
    url = printed["httpServers"]["hatp-memory"]
    process, lines = await start_service(layout)
    try:
        assert lines[-1:] == [SERVICE_READY], lines
        token = (
            await anyio.Path(url["tokenFile"]).read_text()
        ).strip()  # made at the service's first start (HATP-MCP-49)
        config = tmp_path / "clients.json"
        servers = {
            "bridge": printed["mcpServers"]["hatp-memory"],
            "url": {"url": url["url"], "headers": {"Authorization": f"Bearer {token}"}},
            "stranger": {"url": url["url"]},
        }
        config.write_text(json.dumps({"mcpServers": servers}))
        status = json.loads((service_folder(layout.root) / "status.json").read_text())
        assert status["children"]["memory"]["url"] == url["url"]
        entity = {"entities": [{"name": "erin", "entityType": "person", "observations": []}]}
        seen = await anyio.to_thread.run_sync(
            lambda: run_client("fastmcp_each.py", str(config), "create_entities", json.dumps(entity))
        )
    finally:
        process.send_signal(signal.SIGTERM)
        with anyio.fail_after(30):
            await process.wait()
    for name in ("bridge", "url"):
        assert "saga_begin" in seen[name]["tools"] and "delete_relations" not in seen[name]["tools"], seen
        assert not seen[name]["isError"], seen[name]
    assert '"erin"' in memory.read_text()
    stranger = seen["stranger"]  # no token: the proxy serves only the organisation's client (HATP-JRN-17)
    assert "CALLER_UNPROVEN" in json.dumps(stranger) and stranger.get("isError") is not False, stranger


@pytest.mark.anyio
async def test_the_readmes_wrapping_walkthrough_runs_as_written_and_prints_server_memory_beside_the_others(
    tmp_path: Path,
) -> None:
    setup, _enrol, _terminal, wrapping = commands()
    text = README.read_text()
    section = text[text.index("A server you did not write joins the same service") :]
    policy_json, printed_json = re.findall(r"```json\n(.*?)```", section, re.S)[:2]
    for command in setup:
        await run(command, tmp_path)
    org = tmp_path / "hatp-example"
    (org / "memory-policy.json").write_text(policy_json.replace("/home/you", str(tmp_path)))
    install, *steps = wrapping
    assert install == "cd ~/hatp-example && npm install @modelcontextprotocol/server-memory@2026.8.31"
    (org / "node_modules").symlink_to(server("server-memory").split("/@modelcontextprotocol/")[0])  # pinned
    assert [c.split()[1] for c in steps] == ["proxy", "org", "mcp-config"]
    for command in steps:
        await run(command, tmp_path)
    block = json.loads((org / "claude-desktop.json").read_text())
    shown = json.loads(printed_json)
    assert set(block["mcpServers"]) == set(shown["mcpServers"]) and set(block["httpServers"]) == set(
        shown["httpServers"]
    )
    assert block["mcpServers"]["hatp-memory"]["args"][2:] == ["connect", "memory", "--org", str(org)]
    assert set(block["httpServers"]["hatp-memory"]) == set(shown["httpServers"]["hatp-memory"])

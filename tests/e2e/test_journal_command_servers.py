"""servers.journal's allow-list naming a stdio command (HATP-PXY-50): server-memory (npm, nobody here wrote it)
started by the journal exactly as the proxy starts its upstream, with exactly the environment the entry names; an
agent's saga on it rolled back through that command."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.journal_server import KEY_META
from hatp_mcp.mcp.launch import stdio_params
from servers.journal import read_allow_list
from tests.e2e.test_proxy_npm_servers import server

pytestmark = [pytest.mark.e2e]

SECRET = "s3cr3t-of-the-journals-own-environment"


def allow_list(tmp: Path, entry: dict[str, Any]) -> Path:
    path = tmp / "allow.json"
    path.write_text(json.dumps({"servers": {"memory": entry}}))
    return path


def test_HATP_PXY_50_an_allow_listed_command_gets_exactly_the_environment_its_entry_names(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("from-a-file\n")
    key.chmod(stat.S_IRUSR | stat.S_IWUSR)
    entry = {
        "command": "node",
        "args": ["index.js"],
        "env": {"MEMORY_FILE_PATH": "m.jsonl", "TOKEN": {"env": "THE_TOKEN"}, "KEY": {"file": "key"}},
        "cwd": "srv",
        "tools": ["delete_entities"],
    }
    environ = {"THE_TOKEN": "t0k3n", "JOURNALS_OWN": SECRET}
    targets, tools = read_allow_list(allow_list(tmp_path, entry), environ)
    params = targets["memory"].command
    assert params is not None and (params.command, params.args) == ("node", ["index.js"])
    assert params.env == {"MEMORY_FILE_PATH": "m.jsonl", "TOKEN": "t0k3n", "KEY": "from-a-file"}
    assert params.cwd == str(tmp_path / "srv") and tools["memory"] == frozenset({"delete_entities"})


def test_HATP_PXY_50_an_allow_listed_command_of_another_shape_is_refused_naming_its_path(tmp_path: Path) -> None:
    with pytest.raises(HatpError) as refused:
        read_allow_list(allow_list(tmp_path, {"command": "node", "shell": True}), {})
    assert refused.value.rule == "HATP-PXY-50" and refused.value.path == "servers.memory.shell"


def test_HATP_PXY_50_an_allow_listed_commands_secret_is_refused_as_the_proxys_upstream_is(tmp_path: Path) -> None:
    (tmp_path / "key").write_text(SECRET)
    (tmp_path / "key").chmod(0o644)
    with pytest.raises(HatpError) as loose:
        read_allow_list(allow_list(tmp_path, {"command": "node", "env": {"KEY": {"file": "key"}}}), {})
    with pytest.raises(HatpError) as unset:
        read_allow_list(allow_list(tmp_path, {"command": "node", "env": {"T": {"env": "NOT_SET"}}}), {})
    assert (loose.value.rule, loose.value.code) == ("HATP-PXY-2", "SECRET_FILE_OPEN")
    assert (unset.value.code, unset.value.path) == ("ENV_NOT_SET", "servers.memory.env.T")
    assert SECRET not in loose.value.one_line()


@pytest.mark.anyio
async def test_HATP_PXY_50_the_journal_undoes_a_step_through_an_allow_listed_npm_server(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    entry = {
        "command": "node",
        "args": [server("server-memory")],
        "env": {"MEMORY_FILE_PATH": str(memory)},
        "tools": ["delete_entities"],
    }
    allow = allow_list(tmp_path, entry)
    journal = stdio_params("servers.journal", tmp_path / "journal", ["--allow", str(allow), "--retry-base-ms", "20"])
    journal = journal.model_copy(update={"env": {**(journal.env or {}), "JOURNALS_OWN": SECRET}})
    memory_server = StdioServerParameters(
        command="node", args=[server("server-memory")], env={"MEMORY_FILE_PATH": str(memory)}
    )
    with anyio.fail_after(90):
        async with Client(stdio_client(journal)) as j, Client(stdio_client(memory_server)) as m:

            async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
                result = await j.call_tool(tool, args)
                assert not result.is_error and result.structured_content is not None, result.content
                return result.structured_content

            saga = (await call("saga_begin", {"name": "notes"}))["sagaId"]
            undo = {"server": "memory", "tool": "delete_entities", "arguments": {"entityNames": ["dave"]}}
            step = await call("saga_add_step", {"saga_id": saga, "action": "remember dave", "undo": undo})
            dave = {"name": "dave", "entityType": "person", "observations": []}
            made = await m.call_tool("create_entities", {"entities": [dave]}, meta={KEY_META: step["key"]})
            await call("saga_complete_step", {"saga_id": saga, "step_id": step["stepId"], "output": {}})
            written = memory.read_text()
            done = await call("saga_rollback", {"saga_id": saga, "reason": "not needed"})
    assert not made.is_error and '"dave"' in written
    assert done["status"] == "ROLLED_BACK", done
    assert '"dave"' not in memory.read_text()

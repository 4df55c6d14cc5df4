"""Shadow mode and reload over real processes: the proxy (servers.journal_proxy --policy FILE) in front of the npm
server-memory, driven by the MCP SDK's client; the operator reads the shadow log and the policy's status with
`hatp proxy shadow` and `hatp proxy status` (spec/proxy.md HATP-PXY-40..44)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from hatp_mcp.mcp.launch import stdio_params
from tests.e2e.test_proxy_npm_servers import SECRET, call, memory_policy, proxy

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def hatp(*args: str) -> tuple[int, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "hatp_mcp.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else done.stderr


def refusal(result: Any) -> dict[str, Any]:
    assert result.is_error and result.structured_content is not None, result
    found: dict[str, Any] = result.structured_content["refusal"]
    return found


async def test_server_memory_in_shadow_mode_runs_denied_and_hidden_calls_and_the_operator_sees_each_with_its_rule(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    policy = {**memory_policy(memory), "shadow": True}
    async with proxy(tmp_path, policy) as client:
        with anyio.fail_after(60):
            listed = {t.name for t in (await client.list_tools()).tools}
            await call(client, "saga_begin", {"name": "shadowed"})
            made = await call(
                client, "create_entities", {"entities": [{"name": SECRET, "entityType": "person", "observations": []}]}
            )
            related = await call(
                client, "create_relations", {"relations": [{"from": SECRET, "to": SECRET, "relationType": "is"}]}
            )
            hidden = await call(
                client, "delete_relations", {"relations": [{"from": SECRET, "to": SECRET, "relationType": "is"}]}
            )
            denied = await call(client, "delete_entities", {"entityNames": [SECRET]})
            unknown = await call(client, "no_such_tool", {})
            status = (await call(client, "saga_status", {})).structured_content
    assert "delete_relations" in listed  # hide is not enforced in shadow mode
    assert not made.is_error and not related.is_error and not hidden.is_error and not denied.is_error
    assert SECRET not in memory.read_text()  # the denied delete_entities reached server-memory
    assert refusal(unknown)["code"] == "UNKNOWN_TOOL"  # still refused (HATP-PXY-41)
    assert [s["tool"] for s in status["steps"]] == ["create_entities", "create_relations"]  # still journaled
    code, entries = hatp("proxy", "shadow", "--data", str(tmp_path / "proxy"))
    assert code == 0
    assert [(e["tool"], e["policy"], e["rule"], e["code"]) for e in entries] == [
        ("delete_relations", "hide", "HATP-PXY-7", "UNKNOWN_TOOL"),
        ("delete_entities", "deny", "HATP-PXY-7", "TOOL_DENIED"),
    ]
    assert SECRET not in json.dumps(entries)


async def test_server_memory_takes_a_good_policy_change_while_serving_and_refuses_a_bad_one_keeping_the_old(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    path = tmp_path / "policy.json"
    policy = memory_policy(memory)
    data = str(tmp_path / "proxy")
    async with proxy(tmp_path, policy) as client:
        with anyio.fail_after(60):
            entity = {"name": "carol", "entityType": "person", "observations": []}
            await call(client, "create_entities", {"entities": [entity]})
            before = await call(client, "delete_entities", {"entityNames": ["carol"]})
            allowed = json.loads(json.dumps(policy))
            allowed["tools"]["delete_entities"] = {"policy": "irreversible"}
            path.write_text(json.dumps(allowed))
            listed = {t.name: t.description or "" for t in (await client.list_tools()).tools}
            after = await call(client, "delete_entities", {"entityNames": ["carol"]})
            code_ok, status_ok = hatp("proxy", "status", "--data", data)
            bad = json.loads(json.dumps(allowed))
            bad["tools"]["delete_entities"] = {"policy": "deny"}
            bad["tools"]["forget_everything"] = {"policy": "pass"}  # the upstream has no such tool
            path.write_text(json.dumps(bad))
            await call(client, "create_entities", {"entities": [entity]})
            kept = await call(client, "delete_entities", {"entityNames": ["carol"]})
            code_bad, status_bad = hatp("proxy", "status", "--data", data)
    assert refusal(before)["code"] == "TOOL_DENIED"
    assert "cannot be undone" in listed["delete_entities"]
    assert not after.is_error and not kept.is_error  # the good change took effect; the bad one did not replace it
    assert "carol" not in memory.read_text()
    assert code_ok == 0 and "refused" not in status_ok
    assert code_bad == 1 and status_bad["inForce"] == status_ok["inForce"]
    refused = status_bad["refused"]
    assert (refused["rule"], refused["code"], refused["path"]) == (
        "HATP-PXY-4",
        "UNKNOWN_TOOL",
        "tools.forget_everything",
    )
    assert (tmp_path / "proxy" / "upstream.stderr").is_file()


async def test_HATP_PXY_72_a_reload_that_hides_a_tool_tells_a_handshake_client_which_then_lists_without_it(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    path = tmp_path / "policy.json"
    policy = memory_policy(memory)
    policy["tools"]["search_nodes"] = {"policy": "pass"}
    path.write_text(json.dumps(policy))
    told = anyio.Event()

    async def messages(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    params = stdio_params("servers.journal_proxy", tmp_path / "proxy", ["--policy", str(path)])
    with anyio.fail_after(60):
        async with Client(stdio_client(params), mode="legacy", message_handler=messages) as client:
            declared = client.server_capabilities
            first = {t.name for t in (await client.list_tools()).tools}
            unchanged = await call(client, "read_graph", {})  # the file as it was: nothing to tell
            quiet = told.is_set()
            hidden = json.loads(json.dumps(policy))
            hidden["tools"]["search_nodes"] = {"policy": "hide"}
            path.write_text(json.dumps(hidden))
            await call(client, "read_graph", {})  # the next request takes the file
            with anyio.fail_after(10):  # (sent before that call's answer)
                await told.wait()
            after = {t.name for t in (await client.list_tools()).tools}
    assert declared is not None and declared.tools is not None and declared.tools.list_changed is True
    assert not unchanged.is_error and not quiet
    assert "search_nodes" in first and "search_nodes" not in after and "read_graph" in after


async def test_HATP_PXY_72_a_reload_that_hides_a_tool_reaches_a_2026_listen_stream(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    path = tmp_path / "policy.json"
    policy = memory_policy(memory)
    policy["tools"]["search_nodes"] = {"policy": "pass"}
    path.write_text(json.dumps(policy))
    params = stdio_params("servers.journal_proxy", tmp_path / "proxy", ["--policy", str(path)])
    events: list[Any] = []
    with anyio.fail_after(60):
        async with Client(stdio_client(params)) as client:
            first = {t.name for t in (await client.list_tools()).tools}
            async with client.listen(tools_list_changed=True) as subscription:
                hidden = json.loads(json.dumps(policy))
                hidden["tools"]["search_nodes"] = {"policy": "hide"}
                path.write_text(json.dumps(hidden))
                await call(client, "read_graph", {})  # the next request takes the file
                async for event in subscription:
                    events.append(event)
                    break
            after = {t.name for t in (await client.list_tools()).tools}
    assert [type(e).__name__ for e in events] == ["ToolsListChanged"]
    assert "search_nodes" in first and "search_nodes" not in after

"""The proxy (servers.journal_proxy --policy FILE) in front of MCP servers nobody here wrote: the official npm
server-memory, server-filesystem and server-everything (pinned in tests/e2e/npm_servers/, `make npm-servers`),
each started by the proxy as its upstream, the proxy itself a process driven by the MCP SDK's client."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client

from hatp_mcp.core.journal.proxy_tools import IRREVERSIBLE_NOTE
from hatp_mcp.mcp.launch import ROOT, stdio_params
from tests.acme_org import ORG_DIR
from tests.e2e.coordinator_suite import alive, child_pids

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SERVERS = Path(__file__).resolve().parent / "npm_servers" / "node_modules" / "@modelcontextprotocol"
SECRET = "s3cr3t-never-in-a-log"


def server(name: str) -> str:
    """The npm server's entry point, or a failure saying how to install it (never a skip)."""
    entry = SERVERS / name / "dist" / "index.js"
    if shutil.which("node") is None or not entry.is_file():
        pytest.fail(f"{name} is not installed: run `make npm-servers` (needs node and npm)")
    return str(entry)


def memory_policy(memory_file: Path) -> dict[str, Any]:
    """server-memory with its three natural undo pairs (tests/../third-party-servers notes)."""
    return {
        "upstream": {
            "command": "node",
            "args": [server("server-memory")],
            "env": {"MEMORY_FILE_PATH": str(memory_file)},
        },
        "default": "deny",
        "tools": {
            "read_graph": {"policy": "pass"},
            "delete_relations": {"policy": "hide"},
            "create_entities": {
                "policy": "journal",
                "undo": {"tool": "delete_entities", "arguments": {"entityNames": "result.entities[*].name"}},
            },
            "create_relations": {
                "policy": "journal",
                "undo": {"tool": "delete_relations", "arguments": {"relations": "args.relations"}},
            },
            "add_observations": {
                "policy": "journal",
                "undo": {
                    "tool": "delete_observations",
                    "arguments": {"deletions": "args.observations[*].{entityName: entityName, observations: contents}"},
                },
            },
        },
    }


@asynccontextmanager
async def proxy(tmp: Path, policy: dict[str, Any], env: dict[str, str] | None = None) -> AsyncIterator[Client]:
    path = tmp / "policy.json"
    path.write_text(json.dumps(policy))
    params = stdio_params("servers.journal_proxy", tmp / "proxy", ["--policy", str(path)])
    if env is not None:
        params = params.model_copy(update={"env": env})
    async with Client(stdio_client(params)) as client:
        yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    return await client.call_tool(tool, args)


def text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


async def test_HATP_PXY_7_server_memory_journaled_and_rolled_back_leaves_its_file_byte_identical(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    async with proxy(tmp_path, memory_policy(memory)) as client:
        with anyio.fail_after(60):
            listed = {t.name for t in (await client.list_tools()).tools}
            await call(client, "saga_begin", {"name": "before"})
            base = {"name": "alice", "entityType": "person", "observations": ["likes tea"]}
            await call(client, "create_entities", {"entities": [base]})
            await call(client, "saga_complete", {})
            before = memory.read_bytes()

            begun = (await call(client, "saga_begin", {"name": "meeting"})).structured_content
            bob = {"name": "bob", "entityType": "person", "observations": ["new"]}
            made = await call(client, "create_entities", {"entities": [bob]})
            related = await call(
                client, "create_relations", {"relations": [{"from": "alice", "to": "bob", "relationType": "knows"}]}
            )
            observed = await call(
                client,
                "add_observations",
                {
                    "observations": [
                        {"entityName": "alice", "contents": ["met bob"]},
                        {"entityName": "bob", "contents": ["x"]},
                    ]
                },
            )
            graph = await call(client, "read_graph", {})  # pass: forwarded, not a step
            changed = memory.read_bytes()
            denied = await call(client, "delete_entities", {"entityNames": ["alice"]})
            hidden = await call(client, "delete_relations", {"relations": []})
            after_refusals = memory.read_bytes()
            done = (await call(client, "saga_rollback", {"reason": "wrong meeting"})).structured_content
    assert not made.is_error and not related.is_error and not observed.is_error
    assert "met bob" in json.dumps(graph.structured_content) and changed != before
    assert "delete_relations" not in listed and {"delete_entities", "read_graph", "saga_rollback"} <= listed
    for refused, code in ((denied, "TOOL_DENIED"), (hidden, "UNKNOWN_TOOL")):
        assert refused.is_error and refused.structured_content["refusal"]["rule"] == "HATP-PXY-7"
        assert refused.structured_content["refusal"]["code"] == code
    assert after_refusals == changed  # neither refused call reached server-memory
    assert done["sagaId"] == begun["sagaId"] and done["status"] == "ROLLED_BACK" and "leftInPlace" not in done
    assert [(s["tool"], s["state"]) for s in done["steps"]] == [
        ("create_entities", "ROLLED_BACK"),
        ("create_relations", "ROLLED_BACK"),
        ("add_observations", "ROLLED_BACK"),
    ]
    assert memory.read_bytes() == before


async def test_HATP_PXY_10_an_undo_whose_expression_finds_nothing_is_never_sent_and_the_result_says_why(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    policy = memory_policy(memory)
    policy["tools"]["create_entities"]["undo"]["arguments"]["entityNames"] = "result.created[*].name"  # a typo
    async with proxy(tmp_path, policy) as client:
        with anyio.fail_after(60):
            await call(client, "saga_begin", {"name": "typo"})
            await call(
                client, "create_entities", {"entities": [{"name": "carol", "entityType": "p", "observations": []}]}
            )
            done = (await call(client, "saga_rollback", {})).structured_content
        letters = await hatp_cli("proxy", "dead-letters", "--data", str(tmp_path / "proxy"))
    assert done["status"] == "ROLLBACK_FAILED"
    (step,) = done["steps"]
    assert step["rollback"] == "undo-failed" and "found nothing" in step["error"]
    assert "HATP-PXY-7 at tools.create_entities.undo.arguments.entityNames" in step["error"]
    (dead,) = done["deadLetters"]  # HATP-PXY-10: the reason reaches the model, and the operator
    assert dead == {"stepId": "s1", "tool": "create_entities", "phase": "undo", "error": step["error"]}
    (letter,) = letters
    assert (letter["sagaId"], letter["stepId"], letter["error"]) == (done["sagaId"], "s1", step["error"])
    assert "carol" in memory.read_text()  # no undo went out with its argument missing


def filesystem_policy(root: Path, write_file: str) -> dict[str, Any]:
    return {
        "upstream": {"command": "node", "args": [server("server-filesystem"), str(root)]},
        "default": "pass",
        "tools": {
            "write_file": {"policy": write_file},
            "move_file": {
                "policy": "journal",  # its own inverse, the arguments swapped
                "undo": {
                    "tool": "move_file",
                    "arguments": {"source": "args.destination", "destination": "args.source"},
                },
            },
        },
    }


async def test_HATP_PXY_7_server_filesystem_write_file_denied_never_reaches_the_server(tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text("original")
    async with proxy(tmp_path, filesystem_policy(root, "deny")) as client:
        with anyio.fail_after(60):
            refused = await call(client, "write_file", {"path": str(root / "notes.txt"), "content": "overwritten"})
    assert refused.is_error and refused.structured_content["refusal"]["code"] == "TOOL_DENIED"
    assert "HATP-PXY-7" in text(refused) and (root / "notes.txt").read_text() == "original"


async def test_HATP_PXY_8_an_irreversible_write_is_told_and_the_rollback_says_it_was_left_in_place(
    tmp_path: Path,
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text("original")
    (root / "a.txt").write_text("a")
    async with proxy(tmp_path, filesystem_policy(root, "irreversible")) as client:
        with anyio.fail_after(60):
            tools = {t.name: t for t in (await client.list_tools()).tools}
            await call(client, "saga_begin", {"name": "tidy"})
            moved = await call(client, "move_file", {"source": str(root / "a.txt"), "destination": str(root / "b.txt")})
            wrote = await call(client, "write_file", {"path": str(root / "notes.txt"), "content": "overwritten"})
            done = (await call(client, "saga_rollback", {"reason": "not what the user wanted"})).structured_content
            status = (await call(client, "saga_status", {"saga_id": done["sagaId"]})).structured_content
    assert IRREVERSIBLE_NOTE in (tools["write_file"].description or "")
    assert IRREVERSIBLE_NOTE not in (tools["move_file"].description or "")
    assert not moved.is_error and not wrote.is_error and IRREVERSIBLE_NOTE in text(wrote)
    assert IRREVERSIBLE_NOTE not in text(moved)
    assert done["status"] == "ROLLBACK_FAILED" and done["leftInPlace"] == ["s2"]  # never ROLLED_BACK
    assert [(s["tool"], s["rollback"]) for s in done["steps"]] == [
        ("move_file", "undone"),
        ("write_file", "kept-irreversible"),
    ]
    assert status == done
    assert (root / "notes.txt").read_text() == "overwritten"  # not restored, and the saga says so
    assert (root / "a.txt").read_text() == "a" and not (root / "b.txt").exists()  # the move was undone


async def test_HATP_PXY_2_server_everything_sees_exactly_the_variables_the_policy_names(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text(SECRET + "\n")
    key.chmod(0o600)
    policy = {
        "upstream": {
            "command": "node",
            "args": [server("server-everything")],
            "env": {"LITERAL": "plain", "FROM_ENV": {"env": "HATP_PROXY_TOKEN"}, "FROM_FILE": {"file": str(key)}},
        },
        "default": "hide",
        "tools": {"get-env": {"policy": "pass"}},
    }
    env = {**get_default_environment(), "HATP_PROXY_TOKEN": "token-1", "PROXY_ONLY": "not for the upstream"}
    env["PYTHONPATH"] = str(ROOT)
    async with proxy(tmp_path, policy, env) as client:
        with anyio.fail_after(60):
            listed = [t.name for t in (await client.list_tools()).tools]
            seen = json.loads(text(await call(client, "get-env", {})))
    assert listed == ["get-env", "saga_begin", "saga_complete", "saga_rollback", "saga_status"]
    assert {k: seen[k] for k in ("LITERAL", "FROM_ENV", "FROM_FILE")} == {
        "LITERAL": "plain",
        "FROM_ENV": "token-1",
        "FROM_FILE": SECRET,
    }
    assert set(seen) <= set(get_default_environment()) | {"LITERAL", "FROM_ENV", "FROM_FILE"}
    assert "PROXY_ONLY" not in seen and "HATP_PROXY_TOKEN" not in seen and "PYTHONPATH" not in seen
    logs = "".join(p.read_text(errors="replace") for p in (tmp_path / "proxy").rglob("*") if p.is_file())
    assert SECRET not in logs


def bad_policies(tmp: Path) -> list[tuple[str, dict[str, Any], str, str]]:
    memory = tmp / "memory.jsonl"
    loose = tmp / "loose-key"
    loose.write_text(SECRET)
    loose.chmod(0o644)
    good = memory_policy(memory)
    unknown = json.loads(json.dumps(good))
    unknown["tools"]["create_entity"] = {"policy": "pass"}
    short = json.loads(json.dumps(good))
    short["tools"]["add_observations"]["undo"]["arguments"] = {
        "deletions": "args.observations[*].{entityName: entityName, contents: contents}"
    }
    leaky = json.loads(json.dumps(good))
    leaky["upstream"]["env"]["API_KEY"] = {"file": str(loose)}
    unparsed = json.loads(json.dumps(good))
    unparsed["tools"]["create_entities"]["undo"]["arguments"]["entityNames"] = "result.entities[*.name"
    missing = json.loads(json.dumps(good))
    missing["upstream"]["command"] = "no-such-command-for-hatp"
    return [
        ("unknown-tool", unknown, "HATP-PXY-4", "tools.create_entity"),
        ("no-upstream", missing, "HATP-PXY-4", "upstream"),
        ("undo-short", short, "HATP-PXY-5", "tools.add_observations.undo.arguments.deletions[*]"),
        ("loose-secret", leaky, "HATP-PXY-2", "upstream.env.API_KEY.file"),
        ("bad-expression", unparsed, "HATP-PXY-3", "tools.create_entities.undo.arguments.entityNames"),
    ]


@pytest.mark.parametrize("case", ["unknown-tool", "no-upstream", "undo-short", "loose-secret", "bad-expression"])
async def test_HATP_PXY_4_a_bad_policy_is_refused_at_start_with_the_rule_and_nothing_is_served(
    tmp_path: Path, case: str
) -> None:
    _, policy, rule, path = next(c for c in bad_policies(tmp_path) if c[0] == case)
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    data = tmp_path / "proxy"
    argv = [sys.executable, "-m", "servers.journal_proxy", "--transport", "stdio", "--data", str(data)]
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [*argv, "--policy", str(tmp_path / "policy.json")],
            cwd=ROOT,
            check=False,
            stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"journal-proxy: cannot start: {rule} at {path}: ") and "Fix: " in lines[0]
    assert SECRET not in done.stderr.decode()
    assert not (data / "journal.db").exists()  # no journal opened, nothing served
    assert not (tmp_path / "memory.jsonl").exists()  # server-memory wrote nothing


async def hatp_cli(*argv: str) -> Any:
    done = await anyio.run_process([sys.executable, "-m", "hatp_mcp.cli", *argv], cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


async def test_HATP_PXY_9_a_proxy_killed_mid_saga_restarts_with_it_open_and_its_rollback_restores_the_file(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    data = tmp_path / "proxy"
    alice = {"name": "alice", "entityType": "person", "observations": ["likes tea"]}
    bob = {"name": "bob", "entityType": "person", "observations": ["new"]}
    with anyio.fail_after(120):
        async with proxy(tmp_path, memory_policy(memory)) as client:
            outside = await call(client, "create_entities", {"entities": [alice]})  # outside a saga: it stands
            before = memory.read_bytes()
            begun = (await call(client, "saga_begin", {"name": "meeting"})).structured_content
            await call(client, "create_entities", {"entities": [bob]})
            await call(client, "create_relations", {"relations": [{"from": "alice", "to": "bob", "relationType": "k"}]})
            await call(client, "add_observations", {"observations": [{"entityName": "alice", "contents": ["met"]}]})
            changed = memory.read_bytes()
            [pid] = child_pids(os.getpid(), str(data))
            os.kill(pid, signal.SIGKILL)  # no shutdown of any kind; leaving the block reaps it
        killed = not alive(pid)
        listed = await hatp_cli("proxy", "sagas", "--data", str(data))
        after_kill = memory.read_bytes()
        async with proxy(tmp_path, memory_policy(memory)) as client:
            after_restart = memory.read_bytes()
            status = (await call(client, "saga_status", {})).structured_content
            done = (await call(client, "saga_rollback", {"reason": "the meeting was cancelled"})).structured_content
        relisted = await hatp_cli("proxy", "sagas", "--data", str(data))
    assert killed and not outside.is_error and begun is not None and status is not None and done is not None
    assert [s["sagaId"] for s in listed] == [begun["sagaId"]]  # the outside call is no open saga
    assert [(s["tool"], s["state"]) for s in listed[0]["steps"]] == [
        ("create_entities", "COMPLETED"),
        ("create_relations", "COMPLETED"),
        ("add_observations", "COMPLETED"),
    ]
    assert after_kill == changed and after_restart == changed  # the restart undid nothing
    assert status["sagaId"] == begun["sagaId"] and status["status"] == "IN_PROGRESS" and status["recovered"] is True
    assert len(status["steps"]) == 3 and "openSagas" not in status
    assert done["status"] == "ROLLED_BACK" and memory.read_bytes() == before  # byte-identical, alice still there
    assert b"alice" in before and relisted == []


async def test_HATP_PXY_4_an_upstream_that_never_answers_initialize_ends_the_proxy_within_its_start_bound(
    tmp_path: Path,
) -> None:
    silent = tmp_path / "silent_upstream.py"
    silent.write_text("import sys\nfor _ in sys.stdin:\n    pass\n")  # reads every request, answers none
    policy = {"upstream": {"command": sys.executable, "args": [str(silent)]}, "default": "deny", "tools": {}}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    data = tmp_path / "proxy"
    argv = [sys.executable, "-m", "servers.journal_proxy", "--transport", "stdio", "--data", str(data)]
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [*argv, "--policy", str(tmp_path / "policy.json"), "--start-timeout", "2"],
            cwd=ROOT,
            check=False,
            stdin=subprocess.DEVNULL,  # (the proxy reads its client only once its upstream listed its tools)
            stderr=subprocess.PIPE,
        )
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("journal-proxy: cannot start: HATP-PXY-4 at upstream: ") and "Fix: " in lines[0]
    assert "no answer within 2s (--start-timeout)" in lines[0]
    assert not (data / "journal.db").exists()  # no journal opened, nothing served


async def hatp_run(*argv: str) -> tuple[int, Any, list[str]]:
    """`hatp ARGV`: its exit status, its stdout as JSON (None when empty) and its stderr's lines."""
    done = await anyio.run_process([sys.executable, "-m", "hatp_mcp.cli", *argv], cwd=ROOT, check=False)
    out = done.stdout.decode().strip()
    return done.returncode, json.loads(out) if out else None, done.stderr.decode().strip().splitlines()


async def test_HATP_PXY_11_proxy_check_validates_a_policy_against_the_live_upstream_and_serves_nothing(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    good = tmp_path / "good.json"
    good.write_text(json.dumps(memory_policy(memory)))
    _, unknown, _, _ = bad_policies(tmp_path)[0]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(unknown))
    with anyio.fail_after(90):
        ok = await hatp_run("proxy", "check", str(good))
        refused = await hatp_run("proxy", "check", str(bad))
    code, checked, _ = ok
    assert code == 0 and checked["tools"]["create_entities"] == "journal"
    assert checked["tools"]["delete_relations"] == "hide" and checked["tools"]["search_nodes"] == "deny"
    code, out, lines = refused
    assert code == 2 and out is None and len(lines) == 1, lines
    assert lines[0].startswith("hatp: HATP-PXY-4 at tools.create_entity: ") and "Fix: " in lines[0]
    assert not memory.exists()  # server-memory was asked for its tools only


async def test_HATP_PXY_12_proxy_init_wraps_each_claude_desktop_server_with_a_starter_policy(tmp_path: Path) -> None:
    memory = tmp_path / "memory.jsonl"
    root = tmp_path / "files"
    root.mkdir()
    claude = {
        "mcpServers": {
            "memory": {"command": "node", "args": [server("server-memory")], "env": {"MEMORY_FILE_PATH": str(memory)}},
            "files": {"command": "node", "args": [server("server-filesystem"), str(root)]},
            "gone": {"command": "no-such-command-for-hatp"},
        },
        "globalShortcut": "Ctrl+Space",
    }
    (tmp_path / "claude.json").write_text(json.dumps(claude))
    out = tmp_path / "wrapped"
    with anyio.fail_after(120):
        code, summary, lines = await hatp_run(
            "proxy", "init", "--claude-config", str(tmp_path / "claude.json"), "--out", str(out), "--org", str(ORG_DIR)
        )
        config = json.loads((out / "claude_desktop_config.json").read_text())
        entry = config["mcpServers"]["memory"]
        params = StdioServerParameters(command=entry["command"], args=entry["args"])
        async with Client(stdio_client(params)) as client:
            made = await call(
                client, "create_entities", {"entities": [{"name": "a", "entityType": "t", "observations": []}]}
            )
            denied = await call(client, "delete_entities", {"entityNames": ["a"]})
            graph = await call(client, "read_graph", {})
    assert code == 1 and len(lines) == 1 and lines[0].startswith("hatp: gone: HATP-PXY-4 at upstream: ")
    assert config["mcpServers"]["gone"] == claude["mcpServers"]["gone"] and config["globalShortcut"] == "Ctrl+Space"
    assert summary["memory"]["read_graph"] == "pass" and summary["memory"]["create_entities"] == "irreversible"
    assert summary["memory"]["delete_entities"] == "gate" and summary["files"]["write_file"] == "gate"
    assert "journal" not in {p for tools in summary.values() for p in tools.values()}  # nothing without an undo
    assert str(memory) not in (out / "memory" / "policy.json").read_text()  # the value sits in an owner-only file
    assert (out / "memory" / "env" / "MEMORY_FILE_PATH").stat().st_mode & 0o777 == 0o600
    assert "servers.journal_proxy" in entry["args"]
    assert not made.is_error and IRREVERSIBLE_NOTE in text(made) and "a" in json.dumps(graph.structured_content)
    assert denied.is_error and denied.structured_content["refusal"]["rule"] == "HATP-GATE-1"  # no approval brought
    assert '"name":"a"' in memory.read_text()  # the env the config gave reached server-memory


async def test_HATP_PXY_70_proxy_init_gates_destructive_tools_approved_by_the_organisations_approver(
    tmp_path: Path,
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    claude = {"mcpServers": {"files": {"command": "node", "args": [server("server-filesystem"), str(root)]}}}
    (tmp_path / "claude.json").write_text(json.dumps(claude))
    out = tmp_path / "wrapped"
    with anyio.fail_after(120):
        code, summary, _ = await hatp_run(
            "proxy", "init", "--claude-config", str(tmp_path / "claude.json"), "--out", str(out), "--org", str(ORG_DIR)
        )
        checked = await hatp_run("proxy", "check", str(out / "files" / "policy.json"))
    policy = json.loads((out / "files" / "policy.json").read_text())
    tools = policy["tools"]
    assert code == 0 and tools["read_text_file"] == {"policy": "pass"}
    assert tools["write_file"] == {
        "policy": "gate",
        "gate": {"address": "human://acme.com/role/finance-approver", "action": "files.write_file"},
    }
    assert set(summary["files"].values()) == {"pass", "irreversible", "gate"}  # nothing journaled without an undo
    config = json.loads((out / "claude_desktop_config.json").read_text())
    assert config["mcpServers"]["files"]["args"][-2:] == ["--org", str(ORG_DIR)]  # the gate's organisation
    assert checked[0] == 0 and checked[1]["tools"]["write_file"] == "gate"
    readme = (out / "files" / "README.md").read_text()
    assert "`gate`" in readme and "human://acme.com/role/finance-approver" in readme and "write_file" in readme


async def test_HATP_PXY_71_without_an_organisation_init_names_no_approver_and_check_refuses_it_until_set(
    tmp_path: Path,
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    claude = {"mcpServers": {"files": {"command": "node", "args": [server("server-filesystem"), str(root)]}}}
    (tmp_path / "claude.json").write_text(json.dumps(claude))
    out = tmp_path / "wrapped"
    policy_file = out / "files" / "policy.json"
    with anyio.fail_after(120):
        code, _, _ = await hatp_run(
            "proxy", "init", "--claude-config", str(tmp_path / "claude.json"), "--out", str(out)
        )
        unset = await hatp_run("proxy", "check", str(policy_file))
        policy = json.loads(policy_file.read_text())
        for entry in policy["tools"].values():
            if entry["policy"] == "gate":
                entry["gate"]["address"] = "human://acme.com/bob"  # the one value the user edits
        policy_file.write_text(json.dumps(policy))
        edited = await hatp_run("proxy", "check", str(policy_file))
    assert code == 0 and policy["tools"]["write_file"]["policy"] == "gate"
    assert "SET-THE-APPROVER" in (out / "files" / "README.md").read_text()
    status, out_json, lines = unset
    assert status == 2 and out_json is None and len(lines) == 1, lines
    assert lines[0].startswith("hatp: HATP-PXY-71 at tools.") and ".gate.address: " in lines[0]
    assert "Fix: set it to who approves" in lines[0]
    assert edited[0] == 0 and edited[1]["tools"]["write_file"] == "gate"


async def test_HATP_PXY_13_the_operator_rolls_back_a_saga_left_open_once_no_proxy_runs_on_its_data(
    tmp_path: Path,
) -> None:
    memory = tmp_path / "memory.jsonl"
    data = tmp_path / "proxy"
    policy = tmp_path / "policy.json"
    bob = {"name": "bob", "entityType": "person", "observations": ["new"]}
    with anyio.fail_after(120):
        async with proxy(tmp_path, memory_policy(memory)) as client:
            await call(client, "create_entities", {"entities": [{**bob, "name": "alice"}]})  # outside: it stands
            before = memory.read_bytes()
            begun = (await call(client, "saga_begin", {"name": "meeting"})).structured_content
            await call(client, "create_entities", {"entities": [bob]})
            end = ["proxy", "end", begun["sagaId"], "--data", str(data), "--policy", str(policy)]
            while_running = await hatp_run(*end, "--rollback")
            argv = ["-m", "servers.journal_proxy", "--transport", "stdio", "--data", str(data)]
            second = await anyio.run_process(
                [sys.executable, *argv, "--policy", str(policy)],
                cwd=ROOT,
                check=False,
                stdin=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            [pid] = child_pids(os.getpid(), str(data))
            os.kill(pid, signal.SIGKILL)
        changed = memory.read_bytes()
        rolled = await hatp_run(*end, "--rollback")
        again = await hatp_run(*end, "--complete")
    code, out, lines = while_running
    assert code == 2 and out is None and "HATP-PXY-13" in lines[0] and "saga tools" in lines[0]
    assert second.returncode == 2 and "HATP-PXY-13" in second.stderr.decode()  # one proxy per --data
    assert b"bob" in changed  # the kill undid nothing
    code, ended, _ = rolled
    assert code == 0 and ended["sagaId"] == begun["sagaId"] and ended["status"] == "ROLLED_BACK"
    assert memory.read_bytes() == before  # byte-identical, the call made outside the saga still there
    code, out, lines = again
    assert code == 2 and "HATP-PXY-10" in lines[0] and "ROLLED_BACK" in lines[0]

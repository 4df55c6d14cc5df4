"""servers.journal over stdio, undoing through a real shop MCP server over HTTP: an agent returns item #882, the
label fails, the journal undoes the refund and the return by MCP calls; refusals of shell strings and servers
off the allow-list; the record verifies offline."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import stdio_client

from hatp_mcp.core.journal.record import verify_journal
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.mcp.journal_server import JOURNAL_TOOLS, KEY_META
from hatp_mcp.mcp.launch import HttpProcess, launch_http, stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class Agent:
    def __init__(self, journal: Client, shop: Client) -> None:
        self.journal = journal
        self.shop = shop

    async def j(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.journal.call_tool(tool, args)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content

    async def refused(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        with pytest.raises(MCPError) as err:
            await self.journal.call_tool(tool, args)
        assert isinstance(err.value.data, dict)
        return err.value.data

    async def step(self, saga: str, action: str, tool: str, args: dict[str, Any], undo: Any) -> dict[str, Any]:
        """Register, then make the call with the step's key, then report it: what an agent does per step."""
        step = await self.j("saga_add_step", {"saga_id": saga, "action": action, "undo": undo})
        result = await self.shop.call_tool(tool, args, meta={KEY_META: step["key"]})
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            return await self.j("saga_fail_step", {"saga_id": saga, "step_id": step["stepId"], "error": text})
        out = {"saga_id": saga, "step_id": step["stepId"], "output": result.structured_content}
        return await self.j("saga_complete_step", out)

    async def effects(self) -> list[dict[str, Any]]:
        result = await self.shop.call_tool("effects", {})
        assert result.structured_content is not None
        effects: list[dict[str, Any]] = result.structured_content["effects"]
        return effects


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Agent, Path]]:
    data = tmp_path_factory.mktemp("journal-e2e")
    shop_proc: HttpProcess
    async with launch_http("servers.shop", data / "shop", extra=["--label-fails", "--undo-fails", "1"]) as shop_proc:
        allow = data / "allow.json"
        undo_tools = ["unmark_returned", "reverse_refund"]  # the only tools an undo may call on the shop
        allow.write_text(json.dumps({"servers": {"shop": {"url": shop_proc.url, "tools": undo_tools}}}))
        params = stdio_params("servers.journal", data / "journal", ["--allow", str(allow), "--retry-base-ms", "20"])
        async with Client(stdio_client(params)) as journal, Client(shop_proc.url) as shop:
            yield Agent(journal, shop), data


async def test_the_journal_offers_the_saga_tools(world: tuple[Agent, Path]) -> None:
    agent, _ = world
    with anyio.fail_after(30):
        tools = {t.name for t in (await agent.journal.list_tools()).tools}
    assert set(JOURNAL_TOOLS) <= tools


async def test_a_failed_label_rolls_back_the_refund_and_the_return_by_mcp_calls_HATP_JRN_13(
    world: tuple[Agent, Path],
) -> None:
    agent, data = world
    with anyio.fail_after(60):
        saga = (await agent.j("saga_begin", {"name": "return-882"}))["sagaId"]
        unmark = {"server": "shop", "tool": "unmark_returned", "arguments": {"item": "882"}}
        reverse = {"server": "shop", "tool": "reverse_refund", "arguments": {"item": "882"}}
        marked = await agent.step(saga, "mark #882 returned", "mark_returned", {"item": "882"}, unmark)
        refunded = await agent.step(saga, "refund $40", "refund", {"item": "882", "usd": "40.00"}, reverse)
        label = await agent.step(saga, "print the label", "create_label", {"item": "882"}, None)
        assert (marked["state"], refunded["state"], label["state"]) == ("COMPLETED", "COMPLETED", "FAILED")
        done = await agent.j("saga_rollback", {"saga_id": saga, "reason": "the label failed"})
        effects = await agent.effects()
        status = await agent.j("saga_status", {"saga_id": saga, "include_record": True})
    assert done["status"] == "ROLLED_BACK"
    assert [s["state"] for s in done["steps"]] == ["ROLLED_BACK", "ROLLED_BACK", "FAILED"]
    assert done["steps"][1]["undoAttempts"] == 2  # the payments API failed once; retried with the same key
    kinds = [(e["kind"], e["key"]) for e in effects if e["item"] == "882"]
    assert kinds == [
        ("mark", f"{saga}:s1:1"),
        ("refund", f"{saga}:s2:1"),
        ("unrefund", f"{saga}:s2:1:undo"),  # the refund undone first (LIFO), once
        ("unmark", f"{saga}:s1:1:undo"),
    ]
    ring = Keyring()
    ring.add(PublicKeyEntry.from_jwk(json.loads((data / "journal" / "public.jwk.json").read_text())))
    assert verify_journal(status["record"], ring) == []
    again = await agent.refused("saga_rollback", {"saga_id": saga})  # the saga is over: nothing is undone twice
    assert again["rule"] == "HATP-JRN-1" and again["code"] == "ILLEGAL_EVENT"


async def test_a_shell_command_as_an_undo_is_refused_HATP_JRN_13(world: tuple[Agent, Path]) -> None:
    agent, _ = world
    with anyio.fail_after(30):
        saga = (await agent.j("saga_begin", {"name": "shell"}))["sagaId"]
        as_string = await agent.refused(
            "saga_add_step", {"saga_id": saga, "action": "refund", "undo": "curl -X POST https://pay/reverse"}
        )
        as_object = await agent.refused(
            "saga_add_step",
            {"saga_id": saga, "action": "refund", "undo": {"server": "shop", "tool": "x", "command": "rm -rf /"}},
        )
        steps = await agent.j("saga_list_steps", {"saga_id": saga})
    assert (as_string["rule"], as_string["code"], as_string["path"]) == ("HATP-JRN-13", "SHELL_REFUSED", "undo")
    assert (as_object["code"], as_object["path"]) == ("SHELL_REFUSED", "undo.command")
    assert steps["steps"] == []  # nothing was registered


async def test_an_undo_on_a_server_off_the_allow_list_is_refused_HATP_JRN_13(world: tuple[Agent, Path]) -> None:
    agent, _ = world
    with anyio.fail_after(30):
        saga = (await agent.j("saga_begin", {"name": "elsewhere"}))["sagaId"]
        undo = {"server": "http://evil.example/mcp", "tool": "reverse_refund", "arguments": {"item": "1"}}
        refused = await agent.refused("saga_add_step", {"saga_id": saga, "action": "refund", "undo": undo})
    assert (refused["rule"], refused["code"], refused["path"]) == ("HATP-JRN-13", "SERVER_NOT_ALLOWED", "undo.server")
    assert "allow-list" in refused["reason"]
    forward = {"server": "shop", "tool": "refund", "arguments": {"item": "1", "usd": "999.00"}}
    with anyio.fail_after(30):
        tool = await agent.refused("saga_add_step", {"saga_id": saga, "action": "x", "undo": forward})
    assert (tool["code"], tool["path"]) == ("TOOL_NOT_ALLOWED", "undo.tool")  # an undo that is a forward action


async def test_a_saga_whose_steps_went_through_completes_and_a_pending_one_cannot_HATP_JRN_6(
    world: tuple[Agent, Path],
) -> None:
    agent, _ = world
    with anyio.fail_after(30):
        saga = (await agent.j("saga_begin", {"name": "ok"}))["sagaId"]
        undo = {"server": "shop", "tool": "unmark_returned", "arguments": {"item": "900"}}
        await agent.step(saga, "mark #900 returned", "mark_returned", {"item": "900"}, undo)
        pending = await agent.j("saga_add_step", {"saga_id": saga, "action": "not reported yet"})
        refused = await agent.refused("saga_complete", {"saga_id": saga})
        await agent.j("saga_complete_step", {"saga_id": saga, "step_id": pending["stepId"]})
        done = await agent.j("saga_complete", {"saga_id": saga})
    assert (refused["rule"], refused["code"]) == ("HATP-JRN-6", "STEPS_OPEN")
    assert done["status"] == "COMPLETED"


async def test_the_journal_server_on_postgresql_keeps_a_saga_across_a_restart_and_rolls_it_back_HATP_JRN_10(
    tmp_path: Path, pg_url: str
) -> None:
    """`--store postgresql://...`: a saga begun by one journal process is found by the next one on the same
    database (its own data dir holds only the key), which rolls it back through the shop and signs a record that
    verifies; nothing was written to a SQLite file."""
    async with launch_http("servers.shop", tmp_path / "shop") as shop_proc:
        allow = tmp_path / "allow.json"
        allow.write_text(json.dumps({"servers": {"shop": {"url": shop_proc.url, "tools": ["unmark_returned"]}}}))
        params = stdio_params("servers.journal", tmp_path / "journal", ["--allow", str(allow), "--store", pg_url])
        undo = {"server": "shop", "tool": "unmark_returned", "arguments": {"item": "77"}}
        with anyio.fail_after(60):
            async with Client(stdio_client(params)) as journal, Client(shop_proc.url) as shop:
                agent = Agent(journal, shop)
                saga = (await agent.j("saga_begin", {"name": "return-77"}))["sagaId"]
                await agent.step(saga, "mark #77 returned", "mark_returned", {"item": "77"}, undo)
            async with Client(stdio_client(params)) as journal, Client(shop_proc.url) as shop:
                agent = Agent(journal, shop)
                found = await agent.j("saga_status", {"saga_id": saga})
                done = await agent.j("saga_rollback", {"saga_id": saga, "reason": "changed my mind"})
                status = await agent.j("saga_status", {"saga_id": saga, "include_record": True})
                effects = await agent.effects()
    assert (found["status"], [s["state"] for s in found["steps"]]) == ("IN_PROGRESS", ["COMPLETED"])
    assert done["status"] == "ROLLED_BACK"
    assert [(e["kind"], e["key"]) for e in effects] == [("mark", f"{saga}:s1:1"), ("unmark", f"{saga}:s1:1:undo")]
    ring = Keyring()
    ring.add(PublicKeyEntry.from_jwk(json.loads((tmp_path / "journal" / "public.jwk.json").read_text())))
    assert verify_journal(status["record"], ring) == []
    assert not (tmp_path / "journal" / "journal.db").exists()

"""The proxy's binding in memory: its lookup built from the policy file, and the legacy undo map as a policy
(hatp_mcp/mcp/journal_proxy.py, spec/proxy.md)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.core.journal.undo_map import UndoMap
from hatp_mcp.core.model.proxy_policy import HttpUpstream, load_policy
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.journal_proxy import JournalingProxy
from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.runtime.journal.undoable import DidNotHappen, Happened
from hatp_mcp.store.journal_store import MemoryJournalStore

pytestmark = pytest.mark.anyio


def upstream() -> tuple[MCPServer, set[str]]:
    made: set[str] = set()
    server = MCPServer("upstream", log_level="WARNING")

    @server.tool()
    def make(name: str) -> dict[str, Any]:
        made.add(name)
        return {"id": name}

    @server.tool()
    def unmake(id: str) -> dict[str, Any]:
        made.discard(id)
        return {"id": id}

    @server.tool()
    def find(name: str) -> dict[str, Any]:
        return {"found": name in made}

    return server, made


POLICY = {
    "upstream": {"url": "http://127.0.0.1:9/mcp"},
    "tools": {
        "make": {
            "policy": "journal",
            "undo": {"tool": "unmake", "arguments": {"id": "result.id"}},
            "lookup": {"tool": "find", "arguments": {"name": "args.name"}, "happened": "result.found"},
        }
    },
}


def journal() -> Journal:
    return Journal(MemoryJournalStore(), SigningKey.generate(["journal"]))


async def test_a_lookup_from_the_policy_file_tells_whether_a_lost_call_happened_HATP_PXY_3() -> None:
    server, made = upstream()
    with anyio.fail_after(10):
        async with Client(server) as client:
            j = journal()
            JournalingProxy(client, (await client.list_tools()).tools, j, load_policy(POLICY))
            look = j.tool("make").lookup
            assert look is not None
            absent = await look({"name": "a"}, "k1")
            made.add("a")
            found = await look({"name": "a"}, "k1")
    assert isinstance(absent, DidNotHappen) and isinstance(found, Happened)


async def test_a_policy_that_does_not_fit_the_upstream_registers_nothing_HATP_PXY_4() -> None:
    server, _ = upstream()
    bad = {**POLICY, "tools": {"make": {**POLICY["tools"]["make"], "undo": {"tool": "remove"}}}}
    with anyio.fail_after(10):
        async with Client(server) as client:
            j = journal()
            with pytest.raises(HatpError) as err:
                JournalingProxy(client, (await client.list_tools()).tools, j, load_policy(bad))
    assert (err.value.rule, err.value.path) == ("HATP-PXY-4", "tools.make.undo.tool")
    with pytest.raises(HatpError):
        j.tool("make")


def test_the_legacy_undo_map_becomes_the_same_proxy_as_a_policy_HATP_JRN_14() -> None:
    undo_map = UndoMap.parse(
        {
            "tools": {
                "refund": {"undo": "reverse", "arguments": {"item": "/args/item"}, "constants": {"why": "undo"}},
                "ship": {"pivot": True},
            }
        }
    )
    policy = undo_map.policy(HttpUpstream(url="http://127.0.0.1:9/mcp"))
    assert policy.default == "irreversible" and policy.tools["ship"].policy == "irreversible"
    undo = policy.tools["refund"].undo
    assert undo is not None and undo.tool == "reverse"
    assert undo.arguments == {"item": '"args"."item"', "why": '`"undo"`'}

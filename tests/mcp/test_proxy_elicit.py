"""The gate's inbox link as a URL-mode elicitation (hatp_mcp/mcp/proxy_elicit.py, spec/proxy.md HATP-PXY-66), with
SDK clients in memory: one that declares URL mode over a connection that can carry the request, one that declares
it with no back-channel, and one that declares nothing."""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from hatp_mcp.mcp.proxy_elicit import url_elicitation

pytestmark = pytest.mark.anyio

LINK = "https://approvals.acme.example/asks/toolcall.1a2b"


def server(reported: list[str]) -> MCPServer:
    s = MCPServer("gate-like", log_level="WARNING")

    async def progress(message: str) -> None:
        reported.append(message)

    @s.tool()
    async def wait(ctx: Context) -> str:
        report = url_elicitation(ctx.request_context, progress)
        await report(f"waiting for a human approval (ask toolcall.1a2b) from bob: {LINK}")
        await report(f"still waiting for ask toolcall.1a2b (pending): {LINK}")
        return "done"

    return s


async def test_HATP_PXY_66_a_client_declaring_url_mode_gets_the_inbox_link_once_and_others_the_text() -> None:
    elicited: list[types.ElicitRequestURLParams] = []

    async def on_elicit(_context: Any, params: Any) -> types.ElicitResult:
        elicited.append(params)
        return types.ElicitResult(action="decline")  # changes nothing: the call still waits

    seen: dict[str, list[str]] = {}
    with anyio.fail_after(20):
        for name, kw in (
            ("legacy-url", {"mode": "legacy", "elicitation_callback": on_elicit}),
            ("legacy-none", {"mode": "legacy"}),
            ("modern-url", {"elicitation_callback": on_elicit}),  # declared, but no back-channel
        ):
            seen[name] = []
            async with Client(server(seen[name]), **kw) as client:
                result = await client.call_tool("wait", {})
            assert not result.is_error and name
    assert [(p.url, p.elicitation_id, p.mode) for p in elicited] == [(LINK, "toolcall.1a2b", "url")]
    assert "from bob" in elicited[0].message
    for messages in seen.values():  # every client still reads the link in the progress text
        assert len(messages) == 2 and all(LINK in m for m in messages)


async def test_HATP_PXY_66_a_link_that_is_not_a_url_is_never_elicited() -> None:
    elicited: list[Any] = []

    async def on_elicit(_context: Any, params: Any) -> types.ElicitResult:
        elicited.append(params)
        return types.ElicitResult(action="accept")

    s = MCPServer("gate-like", log_level="WARNING")
    reported: list[str] = []

    async def progress(message: str) -> None:
        reported.append(message)

    @s.tool()
    async def wait(ctx: Context) -> str:
        await url_elicitation(ctx.request_context, progress)("waiting: hatp inbox --data GATEWAY_DIR show t.1")
        return "done"

    with anyio.fail_after(20):
        async with Client(s, mode="legacy", elicitation_callback=on_elicit) as client:
            await client.call_tool("wait", {})
    assert elicited == [] and reported == ["waiting: hatp inbox --data GATEWAY_DIR show t.1"]

"""The gate's inbox link by MCP URL-mode elicitation (spec/proxy.md HATP-PXY-66) over real processes: the npm
server-everything behind servers.journal_proxy with `get-sum` gated, the Human Gateway over HTTP, and two SDK
clients of the proxy over stdio: one that declares elicitation with URL mode (on the handshake protocol, whose
connection carries the server's request) gets the inbox link as `elicitation/create`, one that declares nothing
reads it in the progress and the result only. Both calls run once bob approves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from demo.people import ORG
from hatp_mcp.mcp.launch import launch_http, stdio_params
from tests.e2e.test_proxy_gate import AGENT_KEY, INBOX, SERVER_ID, call_and_decide, gated_policy, org_with_inbox
from tests.e2e.test_proxy_npm_servers import text

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_HATP_PXY_66_a_client_declaring_url_mode_is_sent_the_inbox_link_and_one_that_does_not_reads_it(
    tmp_path: Path,
) -> None:
    elicited: list[Any] = []

    async def on_elicit(_context: Any, params: Any) -> types.ElicitResult:
        elicited.append(params)
        return types.ElicitResult(action="accept")

    (tmp_path / "policy.json").write_text(json.dumps(gated_policy("100")))
    with anyio.fail_after(150):
        async with launch_http("servers.gateway", tmp_path / "gateway", extra=["--org", str(ORG)]) as gw:
            args = ["--policy", str(tmp_path / "policy.json"), "--org", str(org_with_inbox(tmp_path))]
            args += ["--server-id", SERVER_ID, "--gateway", gw.url, "--agent-key", str(AGENT_KEY)]
            args += ["--approval-poll", "0.1", "--approval-wait", "60"]
            params = stdio_params("servers.journal_proxy", tmp_path / "proxy", args)
            async with Client(gw.url) as gateway:
                async with Client(stdio_client(params), mode="legacy", elicitation_callback=on_elicit) as declaring:
                    sent = await call_and_decide(declaring, gateway, {"a": 5, "b": 7}, "approve")
                async with Client(stdio_client(params), mode="legacy") as plain:
                    told = await call_and_decide(plain, gateway, {"a": 6, "b": 1}, "approve")
    link = f"{INBOX}/asks/{sent.ask_id}"
    assert [(e.mode, e.url, e.elicitation_id) for e in elicited] == [("url", link, sent.ask_id)]
    assert "The sum of 5 and 7 is 12." in text(sent.result) and link in sent.progress[0]
    assert told.ask_id != sent.ask_id and "The sum of 6 and 1 is 7." in text(told.result)
    assert f"{INBOX}/asks/{told.ask_id}" in told.progress[0] and f"{INBOX}/asks/{told.ask_id}" in text(told.result)

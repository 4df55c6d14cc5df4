"""servers.journal over streamable HTTP proves who sent each tool call (HATP-JRN-17): the operator's callers file
holds each caller's token digest; a call without a token, with a wrong one, or from another caller than the one
that began the saga is refused before anything is done, so nothing is undone; the owner's own rollback undoes
the saga, and its signed record names who began it. Real shop and journal processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from hatp_mcp.core.journal.record import verify_journal
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.mcp.http_callers import bearer_client, hash_token, new_token
from hatp_mcp.mcp.launch import launch_http
from servers import journal as journal_server
from tests.e2e.test_journal_server import Agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

OWNER, OTHER = "agent://acme.com/travel-bot", "agent://acme.com/other-bot"


async def refused(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(MCPError) as err:
        await client.call_tool(tool, args)
    assert isinstance(err.value.data, dict)
    return err.value.data


async def test_an_unauthenticated_rollback_over_http_is_refused_and_nothing_is_undone_HATP_JRN_17(
    tmp_path: Path,
) -> None:
    tokens = {OWNER: new_token(), OTHER: new_token()}
    callers = tmp_path / "callers.json"
    callers.write_text(json.dumps({"callers": {c: {"tokenSha256": hash_token(t)} for c, t in tokens.items()}}))
    with anyio.fail_after(90):
        async with launch_http("servers.shop", tmp_path / "shop") as shop_proc:
            allow = tmp_path / "allow.json"
            allow.write_text(json.dumps({"servers": {"shop": shop_proc.url}}))
            extra = ["--allow", str(allow), "--callers", str(callers)]
            async with (
                launch_http("servers.journal", tmp_path / "journal", extra=extra) as jp,
                bearer_client(jp.url, tokens[OWNER]) as owner,
                bearer_client(jp.url, tokens[OTHER]) as other,
                bearer_client(jp.url, new_token()) as forged,
                Client(jp.url) as anonymous,
                Client(shop_proc.url) as shop,
            ):
                agent = Agent(owner, shop)
                saga = (await agent.j("saga_begin", {"name": "return-90"}))["sagaId"]
                undo = {"server": "shop", "tool": "unmark_returned", "arguments": {"item": "90"}}
                await agent.step(saga, "mark #90 returned", "mark_returned", {"item": "90"}, undo)
                rollback = {"saga_id": saga, "reason": "not mine to undo"}
                no_token = await refused(anonymous, "saga_rollback", rollback)
                wrong_token = await refused(forged, "saga_rollback", rollback)
                not_theirs = await refused(other, "saga_rollback", rollback)
                peek = await refused(other, "saga_status", {"saga_id": saga, "include_record": True})
                begin = await refused(anonymous, "saga_begin", {"name": "squatter"})
                before = [e["kind"] for e in await agent.effects()]
                status = await agent.j("saga_status", {"saga_id": saga})
                done = await agent.j("saga_rollback", rollback)
                record = (await agent.j("saga_status", {"saga_id": saga, "include_record": True}))["record"]
                after = [e["kind"] for e in await agent.effects()]
    for refusal in (no_token, wrong_token, begin):
        assert (refusal["rule"], refusal["code"], refusal["path"]) == (
            "HATP-JRN-17",
            "CALLER_UNPROVEN",
            "Authorization",
        )
    for refusal in (not_theirs, peek):
        assert (refusal["rule"], refusal["code"]) == ("HATP-JRN-17", "NOT_SAGA_OWNER")
    assert before == ["mark"]  # nothing was undone by the refused rollbacks
    assert (status["status"], status["owner"], status["steps"][0]["state"]) == ("IN_PROGRESS", OWNER, "COMPLETED")
    assert done["status"] == "ROLLED_BACK" and after == ["mark", "unmark"]
    ring = Keyring()
    ring.add(PublicKeyEntry.from_jwk(json.loads((tmp_path / "journal" / "public.jwk.json").read_text())))
    assert verify_journal(record, ring) == []
    assert record["events"][0]["body"]["owner"] == OWNER  # signed: who began the saga


def test_the_journal_does_not_serve_http_without_a_callers_file_HATP_JRN_17(tmp_path: Path) -> None:
    allow = tmp_path / "allow.json"
    allow.write_text(json.dumps({"servers": {"shop": "http://127.0.0.1:9/mcp"}}))
    args = ["--transport", "http", "--data", str(tmp_path / "journal"), "--allow", str(allow)]
    assert journal_server.main(args) == 2  # refused at start: no unauthenticated journal over HTTP
    assert not (tmp_path / "journal").exists()

"""servers.journal_proxy in front of the shop (a real stdio child started by a `cmd:` upstream): the upstream's
tools re-exposed unchanged, each call journaled, a rollback undoing through the undo map's upstream tools; with
its journal in SQLite and in PostgreSQL (`--store`)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import stdio_client

from hatp_mcp.mcp.errors import CODES
from hatp_mcp.mcp.http_callers import bearer_client, hash_token, new_token
from hatp_mcp.mcp.launch import launch_http, stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

UNDO_MAP = {
    "tools": {
        "mark_returned": {"undo": "unmark_returned", "arguments": {"item": "/args/item"}},
        "refund": {"undo": "reverse_refund", "arguments": {"item": "/result/item"}},
    }
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def proxy(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Client, Client]]:
    """The proxy on each store: its default SQLite file, or `--store postgresql://...` (a fresh database)."""
    data = tmp_path_factory.mktemp("proxy")
    (data / "undo.json").write_text(json.dumps(UNDO_MAP))
    shop = f"cmd:{sys.executable} -m servers.shop --transport stdio --data {data / 'shop'} --label-fails"
    store = ["--store", request.getfixturevalue("postgres").new_database()] if request.param == "postgresql" else []
    params = stdio_params(
        "servers.journal_proxy", data / "proxy", ["--upstream", shop, "--undo-map", str(data / "undo.json"), *store]
    )
    direct = stdio_params("servers.shop", data / "shop-direct")
    async with Client(stdio_client(params)) as client, Client(stdio_client(direct)) as shop_client:
        yield client, shop_client


async def call(client: Client, name: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(name, args)
    return result


async def test_the_upstream_tools_are_re_exposed_unchanged_with_the_saga_tools_HATP_JRN_14(
    proxy: tuple[Client, Client],
) -> None:
    client, shop = proxy
    with anyio.fail_after(30):
        through = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        direct = {t.name: t.input_schema for t in (await shop.list_tools()).tools}
    assert {k: v for k, v in through.items() if k in direct} == direct
    assert set(through) - set(direct) == {"saga_begin", "saga_complete", "saga_rollback", "saga_status"}


async def test_a_rollback_through_the_proxy_undoes_the_calls_by_the_undo_map_HATP_JRN_14(
    proxy: tuple[Client, Client],
) -> None:
    client, _ = proxy
    with anyio.fail_after(60):
        begun = (await call(client, "saga_begin", {"name": "return-882"})).structured_content
        marked = await call(client, "mark_returned", {"item": "882"})
        refunded = await call(client, "refund", {"item": "882", "usd": "40.00"})
        label = await call(client, "create_label", {"item": "882"})
        done = (await call(client, "saga_rollback", {"reason": "the label failed"})).structured_content
        again = await call(client, "saga_complete", {})  # the saga is over: it neither completes nor rolls back
        effects = (await call(client, "effects", {})).structured_content["effects"]  # (a call outside a saga)
    assert marked.structured_content == {"item": "882", "status": "returned"}  # the upstream's answer, unchanged
    assert refunded.structured_content == {"item": "882", "refunded": "40.00"} and label.is_error
    assert done["sagaId"] == begun["sagaId"] and done["status"] == "ROLLED_BACK"
    assert [(s["tool"], s["state"]) for s in done["steps"]] == [
        ("mark_returned", "ROLLED_BACK"),
        ("refund", "ROLLED_BACK"),
        ("create_label", "FAILED"),
    ]
    saga = begun["sagaId"]
    assert [(e["kind"], e["key"]) for e in effects] == [
        ("mark", f"{saga}:s1:1"),
        ("refund", f"{saga}:s2:1"),
        ("unrefund", f"{saga}:s2:1:undo"),
        ("unmark", f"{saga}:s1:1:undo"),
    ]
    assert again.is_error and again.structured_content["refusal"]["rule"] == "HATP-PXY-10"  # a result, not an error


async def test_the_proxy_over_http_refuses_a_call_without_a_callers_token_and_nothing_runs_HATP_JRN_17(
    tmp_path: Path,
) -> None:
    token = new_token()
    (tmp_path / "callers.json").write_text(json.dumps({"callers": {"agent://a": {"tokenSha256": hash_token(token)}}}))
    (tmp_path / "undo.json").write_text(json.dumps(UNDO_MAP))
    shop = f"cmd:{sys.executable} -m servers.shop --transport stdio --data {tmp_path / 'shop'}"
    extra = ["--upstream", shop, "--undo-map", str(tmp_path / "undo.json"), "--callers", str(tmp_path / "callers.json")]
    with anyio.fail_after(60):
        async with (
            launch_http("servers.journal_proxy", tmp_path / "proxy", extra=extra) as proc,
            Client(proc.url) as anonymous,
            bearer_client(proc.url, token) as agent,
        ):
            with pytest.raises(MCPError) as refused:
                await anonymous.call_tool("refund", {"item": "7", "usd": "40.00"})
            with pytest.raises(MCPError) as rollback:
                await anonymous.call_tool("saga_rollback", {})
            effects = (await agent.call_tool("effects", {})).structured_content
    for err in (refused, rollback):
        assert isinstance(err.value.data, dict)
        assert (err.value.data["rule"], err.value.data["code"]) == ("HATP-JRN-17", "CALLER_UNPROVEN")
        assert err.value.code == CODES["CALLER_UNPROVEN"] == -32089  # its own number, not the generic -32069
    assert effects == {"effects": []}  # the refused refund never reached the shop

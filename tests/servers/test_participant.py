"""The demo tool servers (servers/_participant.py) in memory: an agent meets only the protocol and a status
lookup unless the server is started with --demo-tools, and a resource not in the server's format is refused
(HATP-MCP-31)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from servers import airline, payments
from servers._participant import build

pytestmark = pytest.mark.anyio


async def tools_of(tmp_path: Path, *, demo_tools: bool) -> set[str]:
    server, _runtime, inventory = build(airline.SPEC, tmp_path, demo_tools=demo_tools)
    try:
        async with Client(server) as client:
            return {t.name for t in (await client.list_tools()).tools}
    finally:
        inventory.close()


async def test_HATP_MCP_31_without_demo_tools_a_server_offers_no_way_around_a_transaction(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        plain = await tools_of(tmp_path / "plain", demo_tools=False)
        demo = await tools_of(tmp_path / "demo", demo_tools=True)
    assert plain == {"seat_status"}
    assert demo == {"seat_status", "seat_book", "seat_change"}


@pytest.mark.parametrize("resource", ["nope", "LH123/14C", "LH123//14C", "LH123/2026-12-10/14C/x", " LH123/d/1A"])
async def test_HATP_MCP_31_a_resource_not_in_the_servers_format_is_refused_and_nothing_is_written(
    tmp_path: Path, resource: str
) -> None:
    server, _runtime, inventory = build(airline.SPEC, tmp_path, demo_tools=True)
    with anyio.fail_after(10):
        async with Client(server) as client:
            looked = await client.call_tool("seat_status", {"resource": resource})
            changed = await client.call_tool("seat_change", {"resource": resource, "state": "taken"})
    assert inventory.all() == []
    inventory.close()
    for result in (looked, changed):
        assert result.is_error and result.structured_content is not None
        refusal = result.structured_content["refusal"]
        assert (refusal["rule"], refusal["code"], refusal["path"]) == ("HATP-MCP-31", "BAD_RESOURCE", "$.resource")
        text = result.content[0].text  # type: ignore[union-attr]
        assert text.startswith("BAD_RESOURCE: refused under HATP-MCP-31") and "<flight>/<date>/<seat>" in text


async def test_a_resource_in_the_format_is_looked_up_and_an_unknown_state_is_refused(tmp_path: Path) -> None:
    server, _runtime, inventory = build(payments.SPEC, tmp_path, demo_tools=True)
    with anyio.fail_after(10):
        async with Client(server) as client:
            card = await client.call_tool("card_status", {"resource": "tok_visa_4242"})
            auth = await client.call_tool("card_status", {"resource": "tok_visa_4242/acme-travel"})
            odd = await client.call_tool("card_change", {"resource": "tok_visa_4242", "state": "stolen"})
            shown = (await client.list_tools()).tools
    inventory.close()
    assert not card.is_error and card.structured_content == {
        "resource": "tok_visa_4242",
        "version": 1,
        "state": "free",
        "holder": None,
    }
    assert not auth.is_error
    assert odd.is_error and "stolen" in odd.content[0].text  # type: ignore[union-attr]
    status = next(t for t in shown if t.name == "card_status")
    assert status.description is not None and "<card>/<payee> or <card>" in status.description

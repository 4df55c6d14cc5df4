"""The Directory as a real process over streamable HTTP: resolve and a card resource (HATP-MCP-14, HATP-MCP-15)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.gateway_messages import ResolveRequest, ResolveResult
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.mcp.call import call
from hatp_mcp.mcp.launch import launch_http
from tests.acme_org import ORG_DIR, h, keyring

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


async def test_HATP_MCP_14_a_directory_process_resolves_and_serves_cards_that_verify(tmp_path: Path) -> None:
    req = ResolveRequest(
        address="human://acme.com/role/finance-approver?quorum=2-of-3",
        action="travel.spend",
        amounts=[{"value": "25000", "currency": "USD"}],  # type: ignore[list-item]
        requester=h("dana"),
        now="2026-11-29T10:00:00Z",
    )
    with anyio.fail_after(60):
        async with launch_http("servers.directory", tmp_path, extra=["--org", str(ORG_DIR)]) as proc:
            async with Client(proc.url) as client:
                got = await call(client, "hatp/directory/resolve", req, ResolveResult)
                card = json.loads((await client.read_resource("cards://acme.com/bob")).contents[0].text)  # type: ignore[union-attr]
    assert got.eligible and got.eligible[0].rank == 1
    assert h("dana") in {x.human for x in got.excluded}
    assert verify_raw(card, keyring(), role="directory") and card["id"] == h("bob")


async def test_HATP_MCP_48_the_directory_serves_the_well_known_document_and_trusted_cards_over_http(
    tmp_path: Path,
) -> None:
    import httpx2

    with anyio.fail_after(60):
        async with launch_http("servers.directory", tmp_path, extra=["--org", str(ORG_DIR)]) as proc:
            base = proc.url.removesuffix("/mcp")
            async with httpx2.AsyncClient() as http:
                well_known = await http.get(f"{base}/.well-known/human-card.json")
                bob = await http.get(f"{base}/cards/bob.json")
                nobody = await http.get(f"{base}/cards/nobody.json")
    published = json.loads((ORG_DIR / ".well-known" / "human-card.json").read_text())
    assert well_known.status_code == 200 and well_known.headers["content-type"].startswith("application/json")
    assert well_known.json() == published
    card = bob.json()
    assert bob.status_code == 200 and verify_raw(card, keyring(), role="directory") and card["id"] == h("bob")
    assert nobody.status_code == 404 and nobody.json()["rule"] == "HATP-MCP-48"

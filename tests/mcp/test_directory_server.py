"""The Directory over an in-memory MCP client (servers/directory.py on the acme.com fixtures): resolve ranks and
excludes exactly as the core does (HATP-MCP-14), cards and the well-known document are resources that verify
offline (HATP-MCP-15), and nothing served carries a contact detail (HATP-MCP-16)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError
from mcp.server import MCPServer

from hatp_mcp.core.gateway.address import parse_address
from hatp_mcp.core.gateway.directory import Criteria
from hatp_mcp.core.gateway.machine import open_approval
from hatp_mcp.core.gateway.waiting import open_asks_of
from hatp_mcp.core.model.gateway_messages import ResolveRequest, ResolveResult
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call, call_raw
from hatp_mcp.mcp.extension import read_advertisement
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.store.gateway_store import SqliteGatewayStore, StoredAsk
from servers.directory import build
from tests.acme_org import GATEWAY_ID, ORG_DIR, contacts, directory, h, keyring, plan, well_known

pytestmark = pytest.mark.anyio
FINANCE = "human://acme.com/role/finance-approver?quorum=2-of-3"
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def server(clock: FakeClock) -> MCPServer:
    return build(ORG_DIR, clock)


def request(**changes: Any) -> ResolveRequest:
    body: dict[str, Any] = {
        "address": FINANCE,
        "action": "travel.spend",
        "amounts": [{"value": "25000", "currency": "USD"}],
        "requester": h("dana"),
        "decideBy": "2026-11-29T14:00:00Z",
    }
    body.update(changes)
    return ResolveRequest.model_validate(body)


async def test_HATP_MCP_14_resolve_ranks_the_eligible_and_names_the_rule_excluding_each_other_person(
    clock: FakeClock,
) -> None:
    with anyio.fail_after(10):
        async with Client(server(clock)) as client:
            caps = read_advertisement(client.server_capabilities, "directory")
            got = await call(client, "hatp/directory/resolve", request(), ResolveResult)
    core = directory().resolve(
        parse_address(FINANCE),
        Criteria(
            action="travel.spend",
            up_to={"USD": Decimal(25000)},
            requester=h("dana"),
            decide_by=clock.now().replace(hour=14),
        ),
        clock.now(),
    )
    assert caps["roles"] == ["directory"]
    assert [e.human for e in got.eligible] == [c.human for c in core.eligible]
    assert [e.rank for e in got.eligible] == list(range(1, len(core.eligible) + 1))
    assert [(x.human, x.rule, x.detail) for x in got.excluded] == [(e.human, e.rule, e.detail) for e in core.excluded]
    assert {x.human: x.rule for x in got.excluded}[h("dana")] == "HATP-GW-5"
    assert got.resolved_at == "2026-11-29T10:00:00Z"


@pytest.mark.parametrize(
    ("params", "rule", "code"),
    [
        ({"address": "human://globex.com/role/finance-approver"}, "HATP-MCP-14", "UNKNOWN_ORG"),
        ({"address": "agent://acme.com/travel-bot"}, "HATP-ADDR-4", "BAD_ADDRESS"),
        ({"address": "human://ACME/bob"}, "HATP-ADDR-1", None),
        ({"amounts": [{"value": 25000.5, "currency": "USD"}]}, "HATP-OBJ", None),
    ],
    ids=["other-org", "agent", "malformed", "float-amount"],
)
async def test_HATP_MCP_14_resolve_refuses_what_it_cannot_answer_with_the_rule(
    clock: FakeClock, params: dict[str, Any], rule: str, code: str | None
) -> None:
    body = {**request().wire(), **params}
    with anyio.fail_after(10):
        async with Client(server(clock)) as client:
            with pytest.raises(HatpError) as err:
                await call_raw(client, "hatp/directory/resolve", body, 5)
    if rule == "HATP-OBJ":  # params that are not a ResolveRequest (HATP-MCP-2)
        assert err.value.rule.startswith("HATP-OBJ-") and err.value.path == "amounts[0].value"
    else:
        assert err.value.rule == rule
    if code is not None:
        assert err.value.code == code


async def test_HATP_MCP_15_cards_are_resources_that_verify_as_the_directory_signed_them(clock: FakeClock) -> None:
    with anyio.fail_after(10):
        async with Client(server(clock)) as client:
            listed = sorted(str(r.uri) for r in (await client.list_resources()).resources)
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            alice = json.loads((await client.read_resource("cards://acme.com/alice")).contents[0].text)  # type: ignore[union-attr]
            wk = json.loads(
                (await client.read_resource("wellknown://acme.com/human-card.json")).contents[0].text  # type: ignore[union-attr]
            )
            with pytest.raises(MCPError):
                await client.read_resource("cards://acme.com/zed")
    assert "cards://acme.com/alice" in listed and "wellknown://acme.com/human-card.json" in listed
    assert "cards://{org}/{name}" in templates
    assert alice == json.loads((ORG_DIR / "cards" / "alice.json").read_text())
    assert verify_raw(alice, keyring(), role="directory")
    assert wk == well_known()


async def test_HATP_MCP_16_no_resource_or_resolve_result_of_the_directory_carries_a_contact_detail(
    clock: FakeClock,
) -> None:
    seen: list[str] = []
    with anyio.fail_after(10):
        async with Client(server(clock)) as client:
            for r in (await client.list_resources()).resources:
                seen.append(json.dumps([c.model_dump() for c in (await client.read_resource(r.uri)).contents]))
            for address in (FINANCE, h("frank"), h("alice"), "human://acme.com/pool/security-leads"):
                got = await call(client, "hatp/directory/resolve", request(address=address), ResolveResult)
                seen.append(json.dumps(got.wire()))
    text = "\n".join(seen)
    assert "human://acme.com/frank" in text
    leaked = [a for book in contacts().values() for a in book.values() if a in text]
    assert leaked == []


def _gateway_with_asks_for(data: Path, name: str, count: int) -> None:
    """`count` pending asks addressed to `name` alone, in a gateway store at `data`, as the gateway routes them."""
    store = SqliteGatewayStore(data)
    try:
        for n in range(count):
            p = plan(txn_id=f"txn-acme-{n:04d}", address=h(name))
            rec = open_approval(p, "finance", directory(), gateway=GATEWAY_ID, now=NOW)
            store.create(StoredAsk(rec.ask.ask_id, rec.state, rec, None, None))
    finally:
        store.close()


async def test_HATP_GW_95_resolve_counts_the_asks_open_in_the_gateway_s_store_toward_capacity(
    tmp_path: Path, clock: FakeClock
) -> None:
    _gateway_with_asks_for(tmp_path, "bob", 9)  # his card: 1 open of at most 10; 9 more are live
    store = SqliteGatewayStore(tmp_path)
    live = open_asks_of(s.record for s in store.asks("pending"))  # what the gateway's routing counts
    store.close()
    with anyio.fail_after(10):
        async with Client(build(ORG_DIR, clock, tmp_path)) as client:
            counted = await call(client, "hatp/directory/resolve", request(), ResolveResult)
        async with Client(build(ORG_DIR, clock)) as client:  # no gateway store: the card's number alone
            static = await call(client, "hatp/directory/resolve", request(), ResolveResult)
    core = directory().resolve(
        parse_address(FINANCE),
        Criteria(action="travel.spend", up_to={"USD": Decimal(25000)}, requester=h("dana"), open_asks=live),
        clock.now(),
    )
    assert live == {h("bob"): 9}
    excluded = {x.human: (x.rule, x.detail) for x in counted.excluded}
    assert excluded[h("bob")] == ("HATP-GW-9", "capacity: 10 of 10 asks already open")
    assert h("bob") not in [e.human for e in counted.eligible]
    assert [e.human for e in counted.eligible] == [c.human for c in core.eligible]  # as the gateway ranks them
    assert h("bob") in [e.human for e in static.eligible]


async def test_HATP_GW_95_live_open_asks_rank_a_busier_person_after_a_free_one(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(10):
        async with Client(build(ORG_DIR, clock)) as client:
            before = await call(client, "hatp/directory/resolve", request(), ResolveResult)
        first = before.eligible[0].human
        _gateway_with_asks_for(tmp_path, first.rsplit("/", 1)[-1], 3)
        async with Client(build(ORG_DIR, clock, tmp_path)) as client:
            after = await call(client, "hatp/directory/resolve", request(), ResolveResult)
    assert [e.human for e in after.eligible][-1] == first and after.eligible[0].human != first

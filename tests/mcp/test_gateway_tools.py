"""The gateway's tools for people and agents over an in-memory MCP client: the same rules as the terminal inbox
(HATP-MCP-12), tool-call approvals durable like plan asks (HATP-MCP-13), and no contact details in any result
(HATP-MCP-16)."""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.core.gated_tools.checks import GateRequirement, call_digest, expected_call
from hatp_mcp.core.gateway.proof import sign_decision
from hatp_mcp.core.model.gateway_messages import VoteResult
from hatp_mcp.core.model.messages import PrepareRequest
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.mcp.call import call
from hatp_mcp.mcp.gateway_server import serve_gateway
from hatp_mcp.mcp.gateway_tools import add_gateway_tools
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from tests.acme_org import agent_request, contacts, h, human_key, keyring, plan
from tests.coordinators import COORDINATOR, signer, trusted
from tests.mcp.gateway_fixture import make_gateway

pytestmark = pytest.mark.anyio

REQUIRES = {
    "address": "human://acme.com/role/finance-approver?quorum=2-of-3",
    "requirement": {"action": "travel.spend", "amountFrom": "/amount", "payeeFrom": "/payee"},
}
ARGS: dict[str, Any] = {"card": "tok_visa_4242", "amount": {"value": "2500.00", "currency": "USD"}, "payee": "acme"}
SERVER = "mcp://payments.example"


def gateway_server(gw: GatewayApprover) -> MCPServer:
    server = MCPServer("hatp-gateway", log_level="WARNING")
    serve_gateway(server, gw, trust=trusted(gw.clock))
    add_gateway_tools(server, gw)
    return server


async def tool(client: Client, name: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def refused(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A refusal is a tool result with isError whose text names the rule, with the refusal structured (HATP-MCP-25)."""
    result = await client.call_tool(name, args)
    assert result.is_error and result.structured_content is not None, result.content
    data = result.structured_content["refusal"]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.startswith(f"{data['code']}: refused under {data['rule']}") and data["reason"] in text
    assert isinstance(data, dict)
    return data


async def signed(client: Client, ask_id: str, name: str, action: str, now: datetime, value: Any = None) -> Any:
    """What a person's client does: show the ask, sign its subjectDigest with their own key."""
    shown = await tool(client, "show_ask", {"ask_id": ask_id})
    key = human_key(name)
    nonce = secrets.token_urlsafe(18)
    return sign_decision(key, ask_id, shown["subjectDigest"], h(name), action, now, nonce=nonce, value=value).wire()


async def decide(client: Client, ask_id: str, name: str, action: str, now: datetime) -> Any:
    return await tool(client, "decide", {"ask_id": ask_id, "proof": await signed(client, ask_id, name, action, now)})


async def ask_plan(client: Client, clock: FakeClock) -> None:
    p = plan()
    req = PrepareRequest(txn_id=p.txn_id, branch_id="finance", plan_digest=p.digest(), plan=p, coordinator=COORDINATOR)
    await call(client, "hatp/txn/prepare", req, VoteResult, sign=signer(clock))


async def test_HATP_MCP_12_people_list_show_and_decide_through_tools_and_the_vote_follows(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(gateway_server(gw)) as client:
            await ask_plan(client, clock)
            for_bob = await tool(client, "list_asks", {"human": h("bob")})
            for_dana = await tool(client, "list_asks", {"human": h("dana")})
            shown = await tool(client, "show_ask", {"ask_id": "txn-acme-0001/finance"})
            first = await decide(client, "txn-acme-0001/finance", "bob", "approve", clock.now())
            second = await decide(client, "txn-acme-0001/finance", "carol", "approve", clock.now())
    assert [a["askId"] for a in for_bob["asks"]] == ["txn-acme-0001/finance"] and for_dana["asks"] == []
    assert "[agent-written]" in shown["text"] and "$25,000.00" in shown["text"]
    assert {s["human"]: s["status"] for s in shown["seats"]}[h("dana")] == "excluded"
    assert shown["subjectDigest"] == plan().digest()
    assert first["state"] == "pending" and first["vote"]["decision"] == "pending"
    assert second["state"] == "approved" and second["vote"]["decision"] == "yes"
    verify_raw(second["approval"], keyring(), role="gateway")


@pytest.mark.parametrize(
    ("name", "action", "rule"),
    [
        ("dana", "approve", "HATP-GW-5"),  # the requester approving their own request
        ("alice", "approve", "HATP-GW-4"),  # matched, but her authority is below the total
        ("erin", "approve", "HATP-GW-4"),
        ("bob", "answer", "HATP-ASK-6"),  # an approval is approved or rejected, not answered
    ],
)
async def test_HATP_MCP_12_a_tool_decision_is_refused_exactly_as_the_inbox_refuses_it(
    tmp_path: Path, clock: FakeClock, name: str, action: str, rule: str
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(gateway_server(gw)) as client:
            await ask_plan(client, clock)
            raw = await signed(client, "txn-acme-0001/finance", name, action, clock.now(), "x")
            data = await refused(client, "decide", {"ask_id": "txn-acme-0001/finance", "proof": raw})
    assert data["rule"] == rule
    stored = gw.store.get("txn-acme-0001/finance")
    assert stored is not None and stored.state == "pending" and stored.record is not None
    assert stored.record.decisions == []


async def test_a_connected_client_cannot_decide_by_naming_a_person_under_HATP_GW_19_and_HATP_GW_20(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    ask_id = "txn-acme-0001/finance"
    agent_key = SigningKey.generate(["approver"])  # the agent's own key, on no card
    with anyio.fail_after(10):
        async with Client(gateway_server(gw)) as client:
            await ask_plan(client, clock)
            named = await client.call_tool("decide", {"ask_id": ask_id, "human": h("bob"), "action": "approve"})
            shown = await tool(client, "show_ask", {"ask_id": ask_id})
            as_bob = sign_decision(
                agent_key, ask_id, shown["subjectDigest"], h("bob"), "approve", clock.now(), nonce="n" * 20
            )
            forged = await refused(client, "decide", {"ask_id": ask_id, "proof": as_bob.wire()})
            unsigned = {k: v for k, v in as_bob.wire().items() if k != "signature"}
            bare = await refused(client, "decide", {"ask_id": ask_id, "proof": unsigned})
    assert named.is_error  # `human` and `action` are not parameters any more: a proof is
    assert (forged["rule"], forged["code"]) == ("HATP-GW-20", "DECISION_NOT_PROVEN")
    assert bare["rule"] == "HATP-GW-19"
    stored = gw.store.get(ask_id)
    assert stored is not None and stored.record is not None and stored.record.decisions == []


async def test_HATP_MCP_12_an_unknown_ask_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(gateway_server(gw)) as client:
            shown = await refused(client, "show_ask", {"ask_id": "txn-nope/finance"})
            decided = await refused(client, "decide", {"ask_id": "txn-nope/finance", "proof": {}})
    assert (shown["rule"], shown["code"]) == ("HATP-MCP-12", "NO_SUCH_ASK")
    assert (decided["rule"], decided["code"]) == ("HATP-MCP-12", "NO_SUCH_ASK")


async def test_HATP_MCP_13_a_tool_call_approval_is_routed_durable_and_signed_once_decided(
    tmp_path: Path, clock: FakeClock
) -> None:
    digest = call_digest(expected_call(SERVER, "charge_card", ARGS, GateRequirement.from_config(REQUIRES), None))
    request = {
        "server_id": SERVER,
        "tool": "charge_card",
        "arguments": ARGS,
        "requires": REQUIRES,
        "request": agent_request(digest, clock.now()),
        "call_digest": digest,
    }
    with anyio.fail_after(10):
        async with Client(gateway_server(make_gateway(tmp_path, clock))) as client:
            asked = await tool(client, "request_approval", request)
            await decide(client, asked["askId"], "bob", "approve", clock.now())
        restarted = make_gateway(tmp_path, clock)  # a new process on the same store
        async with Client(gateway_server(restarted)) as client:
            again = await tool(client, "request_approval", request)
            await decide(client, asked["askId"], "alice", "approve", clock.now())
            done = await tool(client, "approval_status", {"ask_id": asked["askId"]})
            wrong = await refused(client, "request_approval", {**request, "call_digest": "sha256:" + "3" * 64})
            bad = await refused(client, "request_approval", {**request, "requires": {"address": "x"}})
    assert asked["state"] == "pending" and asked["quorum"] == [2, 3] and "approval" not in asked
    assert again["askId"] == asked["askId"] and again["state"] == "pending"
    approval = done["approval"]
    verify_raw(approval, keyring(), role="gateway")
    assert (approval["subject"], approval["planDigest"], approval["toolCall"]["tool"]) == (
        "tool-call",
        digest,
        "charge_card",
    )
    assert [d["approver"] for d in approval["decisions"]] == [h("bob"), h("alice")]
    assert [d["proof"]["subjectDigest"] for d in approval["decisions"]] == [digest, digest]
    assert wrong["rule"] == "HATP-GATE-7"
    assert (bad["rule"], bad["code"]) == ("HATP-MCP-13", "BAD_REQUEST")


def contact_strings() -> list[str]:
    return [address for book in contacts().values() for address in book.values()]


async def test_HATP_MCP_16_no_tool_result_of_the_gateway_carries_a_contact_detail(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    seen: list[str] = []
    with anyio.fail_after(10):
        async with Client(gateway_server(gw)) as client:
            p = plan()
            req = PrepareRequest(
                txn_id=p.txn_id, branch_id="finance", plan_digest=p.digest(), plan=p, coordinator=COORDINATOR
            )
            seen.append(
                json.dumps((await call(client, "hatp/txn/prepare", req, VoteResult, sign=signer(clock))).wire())
            )
            ask_id = "txn-acme-0001/finance"
            for name, args in [
                ("list_asks", {}),
                ("show_ask", {"ask_id": ask_id}),
                ("decide", {"ask_id": ask_id, "proof": await signed(client, ask_id, "bob", "approve", clock.now())}),
                ("decide", {"ask_id": ask_id, "proof": await signed(client, ask_id, "frank", "approve", clock.now())}),
                ("show_ask", {"ask_id": ask_id}),
            ]:
                result = await client.call_tool(name, args)
                seen.append(json.dumps([c.model_dump() for c in result.content]))
                seen.append(json.dumps(result.structured_content))
    assert gw.store.contacts_for(h("frank"))  # the gateway does hold them
    text = "\n".join(seen)
    assert "approved" in text
    leaked = [c for c in contact_strings() if c in text]
    assert leaked == []


async def test_a_second_identical_charge_after_an_approval_was_handed_out_gets_a_new_ask_under_HATP_GATE_22(
    tmp_path: Path, clock: FakeClock
) -> None:
    digest = call_digest(expected_call(SERVER, "charge_card", ARGS, GateRequirement.from_config(REQUIRES), None))
    request = {
        "server_id": SERVER,
        "tool": "charge_card",
        "arguments": ARGS,
        "requires": REQUIRES,
        "request": agent_request(digest, clock.now()),
    }
    with anyio.fail_after(10):
        async with Client(gateway_server(make_gateway(tmp_path, clock))) as client:
            first = await tool(client, "request_approval", request)
            await decide(client, first["askId"], "bob", "approve", clock.now())
            await decide(client, first["askId"], "alice", "approve", clock.now())
            done = await tool(client, "approval_status", {"ask_id": first["askId"]})
            second = await tool(client, "request_approval", request)
            retried = await tool(client, "request_approval", request)
            await decide(client, second["askId"], "bob", "approve", clock.now())
            await decide(client, second["askId"], "carol", "approve", clock.now())
            done_again = await tool(client, "approval_status", {"ask_id": second["askId"]})
    assert done["state"] == "approved" and "approval" in done
    assert second["askId"] == first["askId"] + ".2" and second["state"] == "pending" and "approval" not in second
    assert retried["askId"] == second["askId"]
    assert done_again["approval"]["nonce"] != done["approval"]["nonce"]  # a fresh approval for the second charge
    assert done_again["approval"]["planDigest"] == done["approval"]["planDigest"]


async def test_HATP_GW_49_the_requester_is_the_person_the_agents_card_names_never_what_it_writes(
    tmp_path: Path, clock: FakeClock
) -> None:
    """Issue 12: `requester` was an unchecked string; declared as someone else, dana became eligible and approved
    her own agent's charge. Now each of these is refused before anything is stored, and nobody is asked."""
    digest = call_digest(expected_call(SERVER, "charge_card", ARGS, GateRequirement.from_config(REQUIRES), None))
    base = {"server_id": SERVER, "tool": "charge_card", "arguments": ARGS, "requires": REQUIRES}
    signed = agent_request(digest, clock.now())
    attempts = {
        "no request at all": ({**base, "requester": h("bob")}, "HATP-GW-47"),
        **{
            f"requester {r!r}": ({**base, "request": signed, "requester": r}, "HATP-GW-49")
            for r in ("", "not-an-address", "agent://acme.com/travel-bot", "human://other.org/x", h("bob"))
        },
        "the agent's key, naming bob": (
            {**base, "request": agent_request(digest, clock.now(), acts_for=h("bob"))},
            "HATP-GW-48",
        ),
        "a key not on the card": (
            {**base, "request": agent_request(digest, clock.now(), key=SigningKey.generate(["agent"], "k"))},
            "HATP-GW-47",
        ),
    }
    with anyio.fail_after(10):
        async with Client(gateway_server(make_gateway(tmp_path, clock))) as client:
            got = {
                case: (await refused(client, "request_approval", args))["rule"] for case, (args, _r) in attempts.items()
            }
            pending = await tool(client, "list_asks", {})
            asked = await tool(client, "request_approval", {**base, "request": signed, "requester": h("dana")})
    assert got == {case: rule for case, (_a, rule) in attempts.items()}
    assert pending["asks"] == []  # nothing was stored, nobody asked
    seats = {s["human"]: s for s in asked["seats"]}
    assert asked["ask"]["requester"] == h("dana")
    assert seats[h("dana")]["status"] == "excluded" and seats[h("dana")]["rule"] == "HATP-GW-5"


async def test_HATP_MCP_57_a_gateway_for_a_client_that_cannot_sign_offers_no_tool_that_needs_its_signature(
    tmp_path: Path, clock: FakeClock
) -> None:
    from servers.gateway import DEFAULT_ORG, build

    listed = {}
    for signing in (True, False):
        server, gw, deliverer = build(tmp_path / str(signing), DEFAULT_ORG, clock, signing_tools=signing)
        try:
            with anyio.fail_after(10):
                async with Client(server) as client:
                    listed[signing] = {t.name for t in (await client.list_tools()).tools}
        finally:
            gw.store.close()
            deliverer.outbox.close()
    needs_signature = {"decide", "request_approval", "ask_choose", "ask_form", "ask_text"}
    assert needs_signature <= listed[True]
    assert listed[False] == listed[True] - needs_signature
    assert {"list_asks", "show_ask", "approval_status", "question_status"} <= listed[False]


async def test_HATP_GW_96_show_ask_and_list_asks_tell_a_model_who_what_cannot_be_undone_and_in_n_min(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(gateway_server(gw)) as client:
            await ask_plan(client, clock)
            clock.advance(300)  # the text counts from the gateway's clock, not the ask's opening
            shown = await tool(client, "show_ask", {"ask_id": "txn-acme-0001/finance"})
            listed = await tool(client, "list_asks", {})
            status = await tool(client, "approval_status", {"ask_id": "txn-acme-0001/finance"})
    text = shown["text"]
    first, *_ = text.splitlines()
    assert first.startswith("Approve travel.spend requested by Dana Diaz, ") and "(human://acme.com/dana)" in first
    assert "  This payment cannot be undone once approved." in text
    assert "  decide by 2026-11-29 14:00 UTC (in 3 h 55 min)" in text
    assert "Bob Brown, finance-approver" in text and "(human://acme.com/bob)" in text  # who must act, with the address
    assert shown["decideBy"] not in text and shown["decideBy"] == "2026-11-29T14:00:00Z"  # the field stays wire
    assert h("bob") in shown["waitingFor"]  # addresses, for programs
    brief = listed["asks"][0]["text"]
    assert brief.splitlines()[0] == first and "cannot be undone" in brief and "(in 3 h 55 min)" in brief
    assert "waiting for: " in brief and "plan sha256:" not in brief  # the summary, not the details
    assert text.splitlines()[len(brief.splitlines()) - 1] == brief.splitlines()[-1]  # then the details
    bob = "Bob Brown, finance-approver, security-leads (human://acme.com/bob)"
    assert bob in status["waitingForNames"] and status["waitingFor"] == shown["waitingFor"]
    assert status["text"] == brief

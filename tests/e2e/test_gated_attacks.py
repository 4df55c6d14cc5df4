"""Issue 12's attacks on the gated path, over the gated demo's real processes (demo.gated_server and
servers.gateway, stdio): a negative charge is refused by both before anyone is asked; with the gateway's key
alone, re-signed approvals (the same proofs under a new nonce, 30-day-old proofs, no requester, an approver
whose card limit is below the call, the requester's own approval under another requester's name, the agent's
request dropped) are refused, and the payments server charged exactly once."""

from __future__ import annotations

import json
import secrets
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters

from demo.people import decide_as
from hatp_mcp.core.gated_tools.checks import APPROVAL_META_KEY
from hatp_mcp.core.gateway.proof import sign_decision
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.signing.keys import sign_object
from tests.acme_org import agent_request, gateway_key, h, human_key

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
ORG = ROOT / "spec" / "fixtures" / "org"
NOW = "2026-11-29T10:00:00Z"
ARGS: dict[str, Any] = {"card": "tok_visa_4242", "amount": {"value": "2500.00", "currency": "USD"}, "payee": "acme"}


def child(module: str, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", module, *args, "--now", NOW], cwd=str(ROOT))


async def charge(payments: Client, args: dict[str, Any], approval: dict[str, Any] | None = None) -> dict[str, Any]:
    """The refusal's data; fails the test when the call ran."""
    meta = {APPROVAL_META_KEY: approval} if approval is not None else None
    with pytest.raises(MCPError) as e:
        await payments.call_tool("charge_card", args, meta=meta)  # type: ignore[arg-type]
    assert isinstance(e.value.data, dict)
    return e.value.data


def resigned(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return sign_object({**{k: v for k, v in doc.items() if k != "signature"}, **changes}, gateway_key())


def proven(approval: dict[str, Any], people: list[str], when: str) -> list[dict[str, Any]]:
    """Decisions with each person's own proof on this approval's ask, signed at `when`."""
    out = []
    for n in people:
        p = sign_decision(
            human_key(n),
            approval["approvalId"],
            approval["planDigest"],
            h(n),
            "approve",
            parse_ts(when),
            nonce=secrets.token_urlsafe(18),
        )
        out.append({"approver": h(n), "decision": "approve", "decidedAt": when, "via": "inbox", "proof": p.wire()})
    return out


async def test_the_gated_path_refuses_the_issue_12_attacks_over_real_processes(tmp_path: Path) -> None:
    negative = {**ARGS, "amount": {"value": "-2500.00", "currency": "USD"}}
    with anyio.fail_after(90):
        async with (
            Client(child("demo.gated_server", "--db", str(tmp_path / "gate.db"), "--org", str(ORG))) as payments,
            Client(child("servers.gateway", "--data", str(tmp_path / "gw"), "--org", str(ORG))) as gateway,
        ):
            refused_negative = await charge(payments, negative)
            need = (await charge(payments, ARGS))["data"]
            tc = need["toolCall"]
            request = {
                "server_id": tc["server"],
                "tool": tc["tool"],
                "requires": {"address": need["address"], "requirement": need["requirement"]},
                "request": agent_request(need["callDigest"], parse_ts(NOW)),
                "tool_digest": tc.get("toolDigest"),
            }
            gw_negative = await gateway.call_tool("request_approval", {**request, "arguments": negative})
            asks_after_negative = json.loads((await gateway.call_tool("list_asks", {})).content[0].text)["asks"]
            asked = json.loads(
                (
                    await gateway.call_tool(
                        "request_approval", {**request, "arguments": ARGS, "call_digest": need["callDigest"]}
                    )
                )
                .content[0]
                .text
            )
            approval: dict[str, Any] = {}
            for name in ("bob", "alice"):
                approval = (await decide_as(gateway, asked["askId"], name, "approve", now=parse_ts(NOW))).get(
                    "approval"
                ) or approval
            old = format_ts(parse_ts(NOW) - timedelta(days=30))
            attacks = {
                "proofs 30 days old": (
                    "HATP-GATE-24",
                    resigned(approval, decisions=proven(approval, ["bob", "alice"], old)),
                ),
                "no requester": (
                    "HATP-GATE-2",
                    resigned(approval, routing={k: v for k, v in approval["routing"].items() if k != "requester"}),
                ),
                "a $500 approver": (
                    "HATP-GATE-25",
                    resigned(approval, decisions=proven(approval, ["bob", "erin"], NOW)),
                ),
                "dana approves her own agent's charge, bob named requester": (
                    "HATP-GATE-14",
                    resigned(
                        approval,
                        routing={**approval["routing"], "requester": h("bob")},
                        decisions=proven(approval, ["alice", "dana"], NOW),
                    ),
                ),
                "the agent's request dropped": (
                    "HATP-GATE-26",
                    resigned({k: v for k, v in approval.items() if k != "request"}),
                ),
            }
            before = {case: (await charge(payments, ARGS, doc))["rule"] for case, (_rule, doc) in attacks.items()}
            ran = await payments.call_tool("charge_card", ARGS, meta={APPROVAL_META_KEY: approval})  # type: ignore[arg-type]
            reused = await charge(payments, ARGS, resigned(approval, nonce=secrets.token_hex(16)))
            charges = json.loads((await payments.call_tool("charges", {})).content[0].text)
    assert (refused_negative["rule"], refused_negative["path"]) == ("HATP-GATE-23", "arguments/amount")
    assert gw_negative.is_error and gw_negative.structured_content is not None  # a tool refusal (HATP-MCP-25)
    assert gw_negative.structured_content["refusal"]["rule"] == "HATP-GATE-23"
    assert asks_after_negative == []  # nobody was asked
    assert before == {case: rule for case, (rule, _doc) in attacks.items()}
    assert ran.content[0].text == "charged 2500.00 USD on tok_visa_4242 to acme"  # type: ignore[union-attr]
    assert reused["rule"] == "HATP-GATE-18"
    assert charges == ["charged 2500.00 USD on tok_visa_4242 to acme"]

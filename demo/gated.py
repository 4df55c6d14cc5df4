"""`make demo-gated`: one tool call, one signed human approval, across separate processes.

The agent (this process) talks MCP over stdio to a payments server (demo.gated_server) whose `charge_card` is
gated, and to the Human Gateway (servers.gateway, its store in a temporary data dir). The call is refused with
APPROVAL_REQUIRED; the agent asks the gateway to approve that exact call; two finance approvers approve; the call
runs. Replaying the same approval is refused, and so is the approval with changed arguments. Keys and people are
the test-only acme.com organisation in spec/fixtures/org/.
"""

from __future__ import annotations

import json
import secrets
import sys
import tempfile
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters

from demo.people import decide_as, human_key
from hatp_mcp.core.gated_tools.checks import APPROVAL_META_KEY
from hatp_mcp.core.gateway.agents import sign_request
from hatp_mcp.core.signing.keys import SigningKey

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
ORG = ROOT / "spec" / "fixtures" / "org"
AGENT = "agent://acme.com/travel-bot"  # its Directory-signed card: acts for human://acme.com/dana
ARGS: dict[str, Any] = {"card": "tok_visa_4242", "amount": {"value": "2500.00", "currency": "USD"}, "payee": "acme"}


def agent_key() -> SigningKey:
    """The travel-bot's TEST-ONLY key: the one its Directory-signed agent card lists."""
    return SigningKey.from_jwk(
        json.loads((ORG / "test-only-keys" / "agents" / "travel-bot.private.jwk.json").read_text())
    )


def say(who: str, text: str) -> None:
    print(f"  {who:<18} {text}", flush=True)


def child(module: str, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", module, *args], cwd=str(ROOT))


def result_json(result: Any) -> Any:
    return json.loads(result.content[0].text)


async def charge(payments: Client, args: dict[str, Any], approval: dict[str, Any] | None) -> str:
    meta = {APPROVAL_META_KEY: approval} if approval is not None else None
    result = await payments.call_tool("charge_card", args, meta=meta)  # type: ignore[arg-type]
    return str(result.content[0].text)  # type: ignore[union-attr]


async def refused(payments: Client, args: dict[str, Any], approval: dict[str, Any] | None) -> dict[str, Any]:
    try:
        text = await charge(payments, args, approval)
    except MCPError as err:
        say("payments server", f"refused: JSON-RPC {err.code} {err.message.split(':', 1)[0]}")
        data: dict[str, Any] = err.data if isinstance(err.data, dict) else {}
        say("", f"{data.get('rule')}: {data.get('reason')}")
        return data
    raise SystemExit(f"demo failed: the call ran ({text}) where it must be refused")


async def run(tmp: Path) -> int:
    with anyio.fail_after(60):
        async with (
            Client(child("demo.gated_server", "--db", str(tmp / "gate.db"), "--org", str(ORG))) as payments,
            Client(child("servers.gateway", "--data", str(tmp / "gateway"), "--org", str(ORG))) as gateway,
        ):
            print("1. The agent charges $2,500.00 to acme without an approval")
            need = (await refused(payments, ARGS, None))["data"]
            say("", f"ask {need['address']} for {need['requirement']}")
            say("", f"call digest {need['callDigest']}")

            print("2. The agent asks the Human Gateway to approve exactly that call, signing its request")
            tc = need["toolCall"]
            # Who the agent acts for is proven by its key and its Directory-signed card, never by what it writes.
            request = sign_request(
                agent_key(),
                AGENT,
                "human://acme.com/dana",
                "tool-call",
                need["callDigest"],
                datetime.now(UTC),
                nonce=secrets.token_urlsafe(18),
            )
            asked = result_json(
                await gateway.call_tool(
                    "request_approval",
                    {
                        "server_id": tc["server"],
                        "tool": tc["tool"],
                        "arguments": ARGS,
                        "requires": {"address": need["address"], "requirement": need["requirement"]},
                        "request": request.wire(),
                        "call_digest": need["callDigest"],
                        "tool_digest": tc.get("toolDigest"),
                    },
                )
            )
            say("gateway", f"requester {asked['ask']['requester']} (proven by {AGENT}'s signed request)")
            for seat in asked["seats"]:
                say("gateway", f"{seat['human']:<24} {seat['status']:<9} {seat.get('detail') or ''}".rstrip())

            print("3. The finance approvers decide (quorum 2 of 3)")
            approval: dict[str, Any] | None = None
            for name in ("bob", "alice"):
                # Each person signs their own decision with their (test-only) key; the gateway counts nothing else.
                got = await decide_as(gateway, asked["askId"], name, "approve")
                say(name, f"signs an approval with {human_key(name).kid} -> ask {got['state']}")
                approval = got.get("approval")
            assert approval is not None
            say("gateway", f"signed approval {approval['approvalId']} (kid {approval['signature']['kid']})")
            say("", f"nonce {approval['nonce']}, expires {approval['expiresAt']}")

            print("4. The agent calls again with the approval in _meta")
            say("payments server", await charge(payments, ARGS, approval))

            print("5. The agent replays the same approval")
            replay = await refused(payments, ARGS, approval)

            print("6. The agent reuses the approval with changed arguments ($25,000.00)")
            bigger = {**ARGS, "amount": {"value": "25000.00", "currency": "USD"}}
            changed = await refused(payments, bigger, approval)

            charges = result_json(await payments.call_tool("charges", {}))
            print(f"7. The payments server charged {len(charges)} time(s): {charges}")
    ok = replay.get("rule") == "HATP-GATE-18" and changed.get("rule") == "HATP-GATE-7" and len(charges) == 1
    print("demo-gated:", "ok" if ok else "UNEXPECTED")
    return 0 if ok else 1


def main() -> int:
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(run, Path(tmp))


if __name__ == "__main__":
    raise SystemExit(main())

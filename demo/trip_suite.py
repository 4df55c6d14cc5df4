"""The seven server processes of `make demo-mcp`, each its own process on streamable HTTP (127.0.0.1), and the two
people around them: the agent (an MCP client of the coordinator) and the finance approver (a scripted human who
decides through the Human Gateway's MCP tools, or a real person in the terminal inbox).

`open_seven(stack, data)` starts directory, gateway, airline, hotel, calendar, payments and the coordinator (which
reaches the others by URL and trusts the gateway's key from the organisation's well-known document). Every process
is started with a parent watch and stopped when `stack` closes (stdin closed, SIGTERM, then SIGKILL): no orphans,
also on Ctrl-C. This module holds no HATP logic.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp import Client

from demo.trip_world import AIRLINE, CALENDAR, HOTEL, PAYMENTS
from hatp_mcp.core.gateway.proof import sign_decision
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SigningKey
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.mcp.http_callers import local_caller
from hatp_mcp.mcp.launch import HttpProcess, launch_http
from hatp_mcp.runtime.coordinator_trust import trust_coordinator

__all__ = ["COORDINATOR_ID", "GATEWAY_ID", "ORG", "PARTICIPANTS", "Seven", "human_key_file", "open_seven"]

ROOT = Path(__file__).resolve().parents[1]
ORG = ROOT / "spec" / "fixtures" / "org"  # the TEST-ONLY organisation acme.com
WELL_KNOWN = ORG / ".well-known" / "human-card.json"
GATEWAY_ID = "https://acme.com/hatp/gateway"
COORDINATOR_ID = "coordinator://acme.com/demo"
PARTICIPANTS = {"airline": AIRLINE, "hotel": HOTEL, "calendar": CALENDAR, "payments": PAYMENTS}


def human_key_file(human: str) -> Path:
    """The TEST-ONLY private key of a person of acme.com (`human://acme.com/bob` -> .../humans/bob.private.jwk.json)."""
    return ORG / "test-only-keys" / "humans" / f"{human.rsplit('/', 1)[-1]}.private.jwk.json"


@dataclass
class Seven:
    """The running suite: each process by name, the agent's client to the coordinator, the data directory."""

    data: Path
    procs: dict[str, HttpProcess]
    agent: Client

    async def begin(self, plan: Plan) -> dict[str, Any]:
        return await call_raw(self.agent, "hatp/txn/begin", plan.wire(), 30)

    async def status(self, txn_id: str, wait: int = 0, after: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"txnId": txn_id, "waitSeconds": wait}
        if after is not None:
            params["afterEvents"] = after
        return await call_raw(self.agent, "hatp/txn/status", params, wait + 10)

    async def follow(self, txn_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Long-poll the coordinator until `done(status)` or the transaction ends."""
        status = await self.status(txn_id)
        while not done(status) and not status.get("closed"):  # an outcome may come before the close (HATP-MCP-65)
            status = await self.status(txn_id, wait=60, after=status["eventCount"])
        return status

    async def outcome(self, txn_id: str) -> dict[str, Any]:
        return await self.follow(txn_id, lambda s: False)

    async def asked(self, txn_id: str, requirement: str = "finance") -> dict[str, Any]:
        """Until the gateway's vote on `requirement` is recorded: the people are asked (or the trip ended)."""
        return await self.follow(txn_id, lambda s: any(v["branchId"] == requirement for v in s["votes"]))

    async def tool(self, server: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        async with self.procs[server].client() as client:
            result = await client.call_tool(name, args)
        if result.is_error:  # a refusal (HATP-MCP-25): its text says what was refused and what to do
            raise RuntimeError(f"{server}.{name} refused: {result.content[0].text}")  # type: ignore[union-attr]
        if result.structured_content is None:
            raise RuntimeError(f"{server}.{name} answered no structured content: {result}")
        return dict(result.structured_content)

    async def human_decides(self, txn_id: str, action: str = "approve") -> tuple[str, dict[str, Any]]:
        """The scripted finance approver: looks at the ask in the gateway and decides through its MCP tools, signing
        the decision with their own (TEST-ONLY) key, as a person's device would."""
        ask_id = f"{txn_id}/finance"
        shown = await self.tool("gateway", "show_ask", {"ask_id": ask_id})
        who = str(shown["waitingFor"][0])
        key = SigningKey.from_jwk(json.loads(human_key_file(who).read_text()))
        nonce = secrets.token_urlsafe(18)
        terms = shown.get("terms")  # holds-first: the deadline and holds the person approves under
        proof = sign_decision(
            key, ask_id, shown["subjectDigest"], who, action, datetime.now(UTC), nonce=nonce, terms=terms
        )
        return who, await self.tool("gateway", "decide", {"ask_id": ask_id, "proof": proof.wire()})

    def keyring(self) -> Keyring:
        """Every key the records are signed with: the organisation's (gateway), the coordinator's, the servers'.

        Each server's and the gateway's keys are bound to the party they speak for (HATP-SIG-6), so `hatp verify`
        reports evidence signed by one party's key in another's name."""
        org = Keyring.from_jwks(json.loads(WELL_KNOWN.read_text()))
        ring = Keyring(e.with_party(GATEWAY_ID) if "gateway" in e.roles else e for e in org.entries())
        for name in (*PARTICIPANTS, "coordinator"):
            entry = PublicKeyEntry.from_jwk(json.loads((self.data / name / "public.jwk.json").read_text()))
            ring.add(entry.with_party(PARTICIPANTS[name]) if name in PARTICIPANTS else entry)
        return ring


async def open_seven(stack: AsyncExitStack, data: Path, *, extra: dict[str, list[str]] | None = None) -> Seven:
    """Start the seven servers (stopped when `stack` closes) and connect the agent to the coordinator."""
    extra = extra or {}
    procs: dict[str, HttpProcess] = {}

    async def start(name: str, args: list[str], token: str | None = None) -> None:
        launched = launch_http(
            f"servers.{name}", data / name, extra=[*args, *extra.get(name, [])], ready_timeout=60, token=token
        )
        procs[name] = await stack.enter_async_context(launched)

    # the coordinator's key exists before anyone starts, and every participant and the gateway trust it: they act
    # for this coordinator only (spec/mcp-binding.md HATP-TRUST-10)
    trust_coordinator(data / "coordinator", COORDINATOR_ID, [data / "gateway", *(data / n for n in PARTICIPANTS)])
    await start("directory", ["--org", str(ORG)])
    await start("gateway", ["--org", str(ORG)])
    for name in PARTICIPANTS:
        await start(name, ["--demo-tools"])  # the demo sells the room on another channel (room_change)
    links = [f"--participant={uri}={procs[name].url}" for name, uri in PARTICIPANTS.items()]
    links += [f"--participant-keys={uri}={data / name / 'public.jwk.json'}" for name, uri in PARTICIPANTS.items()]
    gateway = ["--gateway", procs["gateway"].url, "--gateway-keys", str(WELL_KNOWN), "--gateway-id", GATEWAY_ID]
    gateway += ["--org", str(ORG)]  # the coordinator checks each person's own signed decision (HATP-TXN-19)
    # and proves each plan's requester: it holds the travel-bot's TEST-ONLY key and signs as it (HATP-TXN-21)
    gateway += ["--agent-key", str(ORG / "test-only-keys" / "agents" / "travel-bot.private.jwk.json")]
    # the agent calls the coordinator with its own bearer token (HATP-MCP-53)
    callers = data / "coordinator" / "callers.json"
    token = local_caller(callers, "agent://acme.com/travel-bot")
    gateway += ["--callers", str(callers)]
    await start("coordinator", [*links, *gateway, "--id", COORDINATOR_ID, "--poll-seconds", "1"], token)
    agent = await stack.enter_async_context(procs["coordinator"].client())
    return Seven(data, procs, agent)

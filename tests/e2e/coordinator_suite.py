"""The coordinator suite as real processes for end-to-end tests: an agent's view of a coordinator over MCP.

`Agent` wraps the agent's MCP client to the coordinator (begin, follow, wait) and `trip` builds the demo trip
plan timed from the real clock. Every wait is a long-poll on the coordinator (signalled), bounded; no sleeps.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp import Client

from demo.trip_mcp import plan_for
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.mcp.http_callers import local_caller
from tests.acme_org import AGENT, GATEWAY_ID, ORG_DIR

__all__ = [
    "GATEWAY_ARGS",
    "PARTICIPANTS",
    "Agent",
    "agent_caller",
    "alive",
    "child_pids",
    "events",
    "problems",
    "record_keyring",
    "trip",
    "uri",
]

PARTICIPANTS = ("airline", "hotel", "calendar", "payments")
WELL_KNOWN = ORG_DIR / ".well-known" / "human-card.json"
# The coordinator holds the travel-bot's TEST-ONLY key and signs each plan as it (HATP-TXN-21; it acts for dana).
AGENT_KEY = ORG_DIR / "test-only-keys" / "agents" / "travel-bot.private.jwk.json"
GATEWAY_ARGS = [
    *("--gateway-keys", str(WELL_KNOWN), "--gateway-id", GATEWAY_ID, "--org", str(ORG_DIR)),
    *("--agent-key", str(AGENT_KEY)),
]


def agent_caller(data: Path) -> tuple[list[str], str]:
    """The coordinator on `data` serves the travel-bot over HTTP (HATP-MCP-53): the `--callers` arguments of a
    fresh callers file under `data` and the bearer token the travel-bot calls it with."""
    callers = data / "callers.json"
    token = local_caller(callers, AGENT)
    return ["--callers", str(callers)], token


def uri(name: str) -> str:
    return f"mcp://{name}.example/hatp"


def trip(txn_id: str, check_in: str, seat: str) -> Plan:
    return plan_for(txn_id, datetime.now(UTC), check_in, seat)


class Agent:
    """The agent side: drives one coordinator over MCP."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def begin(self, plan: Plan) -> dict[str, Any]:
        return await call_raw(self.client, "hatp/txn/begin", plan.wire(), 30)

    async def status(self, txn_id: str, wait: int = 0, after: int | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"txnId": txn_id, "waitSeconds": wait}
        if after is not None:
            params["afterEvents"] = after
        return await call_raw(self.client, "hatp/txn/status", params, wait + 10)

    async def until(self, txn_id: str, state: str) -> dict[str, Any]:
        """Follow the transaction's progress (long-polls) until it reaches `state` or ends."""
        return await self.follow(txn_id, lambda s: s["state"] == state)

    async def asked(self, txn_id: str, requirement: str = "finance") -> dict[str, Any]:
        """Follow until every branch voted and the gateway's vote on `requirement` is recorded (the human is asked)."""
        return await self.follow(
            txn_id, lambda s: s["state"] == "approving" and any(v["branchId"] == requirement for v in s["votes"])
        )

    async def follow(self, txn_id: str, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        status = await self.status(txn_id)
        while not done(status) and not status.get("closed"):  # an outcome may come before the close (HATP-MCP-65)
            status = await self.status(txn_id, wait=30, after=status["eventCount"])
        return status

    async def outcome(self, txn_id: str) -> dict[str, Any]:
        status = await self.status(txn_id)
        while not status.get("closed"):  # the outcome, then the closed record (HATP-MCP-66)
            status = await self.status(txn_id, wait=60)
        return status


def record_keyring(data: Path) -> Keyring:
    """Every key a trip's record is signed with: coordinator, participants (under `data/<name>`), gateway, each
    participant's and the gateway's bound to the party it speaks for (HATP-SIG-6): a record proves its outcome only
    with evidence from the branch's own participant (HATP-REC-11), so the verifier must know whose key is whose."""
    org = Keyring.from_jwks(json.loads(WELL_KNOWN.read_text()))
    ring = Keyring(e.with_party(GATEWAY_ID) if "gateway" in e.roles else e for e in org.entries())
    for pub in data.rglob("public.jwk.json"):
        entry = PublicKeyEntry.from_jwk(json.loads(pub.read_text()))
        name = pub.parent.name.split("-")[0]  # payments-slow is a payments server too
        ring.add(entry.with_party(uri(name)) if name in PARTICIPANTS else entry)
    return ring


def problems(record: dict[str, Any], data: Path) -> list[dict[str, Any]]:
    """What offline verification finds wrong with `record` (empty: it verifies)."""
    return [p.to_dict() for p in verify_record(record, record_keyring(data))]


def events(record: dict[str, Any]) -> list[str]:
    return [e["event"] for e in record["events"]]


def child_pids(parent: int, needle: str) -> list[int]:
    """Processes whose parent is `parent` and whose command line contains `needle` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and needle in cmd:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True

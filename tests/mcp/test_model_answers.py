"""What a model reads from the coordinator's agent tools, end to end over MCP with the SDK's own client: the trip
in memory (tests' participants), a real Human Gateway on the acme.com organisation behind `mcp_approver`, and the
coordinator served by serve_coordinator. While approving the status names who must act, by when and where
(HATP-MCP-54); a rejection carries the person's signed reason (HATP-GW-87); an abort lists every refusal
(HATP-MCP-55)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.model.when import in_words, when_words
from hatp_mcp.mcp.coordinator_server import serve_coordinator
from hatp_mcp.mcp.extension import HatpSettings
from hatp_mcp.mcp.gateway_client import mcp_approver
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.service import TxnService
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.runtime.participant.driver import DryRun
from tests.acme_org import GATEWAY_ID, decide_as, gateway_key, keyring
from tests.coordinators import COORDINATOR, signer
from tests.mcp.gateway_fixture import make_gateway, voter_server

pytestmark = pytest.mark.anyio

INBOX = "https://approvals.acme.example"


@asynccontextmanager
async def agent_view(world: World, gw: GatewayApprover, clock: FakeClock) -> AsyncIterator[Client]:
    """The coordinator's agent tools, its approver the acme gateway over MCP; the client a model would use."""
    ring = world.keyring
    ring.add_signer(gateway_key(), GATEWAY_ID)  # the organisation's gateway speaks for itself (HATP-SIG-6)
    async with Client(voter_server(gw)) as to_gateway:
        approver = mcp_approver(
            to_gateway, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
        )
        svc = TxnService(
            key=world.keys["coordinator"],
            keyring=ring,
            participants=world.participants,
            approver=approver,
            log=world.log,
            clock=clock,
        )
        server = MCPServer("hatp-coordinator-test")
        serve_coordinator(server, svc, HatpSettings(roles=["coordinator"], keys=[]))
        async with svc.running(), Client(server) as client:
            yield client


async def status_of(client: Client, txn_id: str, wait: int = 0) -> dict[str, Any]:
    answer = await client.call_tool("transaction_status", {"txn_id": txn_id, "wait_seconds": wait})
    assert not answer.is_error, answer
    assert answer.structured_content is not None
    return answer.structured_content


async def approving(client: Client, clock: FakeClock, txn_id: str) -> dict[str, Any]:
    begun = await client.call_tool("begin_transaction", {"plan": trip_plan(clock.now(), txn_id).wire()})
    assert not begun.is_error, begun
    while True:  # bounded by the caller's fail_after
        await anyio.wait_all_tasks_blocked()
        status = await status_of(client, txn_id)
        if status["state"] == "approving" and status.get("waitingOn"):
            return status


async def test_HATP_MCP_54_while_approving_the_status_names_who_must_act_by_when_and_where(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    gw.inbox_url = INBOX
    with anyio.fail_after(20):
        async with agent_view(build_world(clock), gw, clock) as client:
            status = await approving(client, clock, "txn-see-1")
    [waiting] = status["waitingOn"]
    plan = trip_plan(clock.now(), "txn-see-1")
    assert waiting["requirementId"] == "finance"
    assert waiting["decideBy"] == plan.approvals[0].decide_by
    assert waiting["link"] == f"{INBOX}/asks/txn-see-1%2Ffinance"
    names = {p["displayName"] for p in waiting["people"]}
    assert names and all(not n.startswith(("human://", "mailto:")) for n in names)
    assert all("finance-approver" in p["roles"] for p in waiting["people"])  # the role the address names
    text = str(status)
    assert "human://acme.com/alice" not in text and "@" not in text  # no address, no contact detail


async def test_HATP_GW_87_after_a_rejection_the_status_carries_the_persons_reason(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(20):
        async with agent_view(build_world(clock), gw, clock) as client:
            status = await approving(client, clock, "txn-see-2")
            stored = gw.store.get("txn-see-2/finance")
            assert stored is not None and stored.record is not None
            asked = [s.human.rsplit("/", 1)[-1] for s in stored.record.seats if s.status == "asked"]
            await decide_as(gw, "txn-see-2/finance", asked[0], "reject", reason="the hotel is over the city cap")
            done = await status_of(client, "txn-see-2", wait=10)
    assert status["waitingOn"][0]["people"]
    assert done["outcome"] == "ABORTED"
    assert "the hotel is over the city cap" in done["firstRefusal"]["reason"]
    assert any("the hotel is over the city cap" in (r["reason"] or "") for r in done["refusals"])


async def test_HATP_MCP_55_an_abort_lists_every_refusal_not_only_the_first(tmp_path: Path, clock: FakeClock) -> None:
    world = build_world(clock)
    world.seat.sold_out = world.room.sold_out = True

    async def card_refused(branch: Branch, now: datetime) -> DryRun:
        return DryRun(refuse_code="CARD_EXPIRED", refuse_reason="the card on file has expired")

    world.pay.dry_run = card_refused  # type: ignore[method-assign]
    with anyio.fail_after(20):
        async with agent_view(world, make_gateway(tmp_path, clock), clock) as client:
            await client.call_tool("begin_transaction", {"plan": trip_plan(clock.now(), "txn-see-3").wire()})
            done = await status_of(client, "txn-see-3", wait=10)
    assert done["outcome"] == "ABORTED"
    refused = {r["branchId"]: (r["code"], r["reason"]) for r in done["refusals"]}
    assert refused == {
        "seat": ("SOLD_OUT", "no seat left"),
        "room": ("SOLD_OUT", "no room left"),
        "pay": ("CARD_EXPIRED", "the card on file has expired"),
    }
    assert len(done["refusals"]) == 3
    assert done["firstRefusal"] == done["refusals"][0]


async def test_HATP_GW_96_while_approving_the_status_gives_the_deadline_in_utc_with_in_n_min(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(20):
        async with agent_view(build_world(clock), gw, clock) as client:
            await approving(client, clock, "txn-see-4")
            clock.advance(60)  # counted from the coordinator's clock when it answers
            status = await status_of(client, "txn-see-4")
    [waiting] = status["waitingOn"]
    left = parse_ts(waiting["decideBy"]) - clock.now()
    assert waiting["decideByWords"] == f"{when_words(waiting['decideBy'])} ({in_words(left.total_seconds())})"
    assert waiting["decideByWords"].endswith(" min)") and " UTC (in " in waiting["decideByWords"]

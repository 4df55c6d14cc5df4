"""hatp/txn/voted with waitSeconds over MCP, in both protocol eras (HATP-MCP-40): the gateway holds the request
until its signed answer changes and the coordinator's McpApprover.wait checks that answer like any other
(HATP-MCP-11). An ask never made is refused at once (HATP-MCP-10); a wait beyond 300 s is refused (HATP-OBJ-3)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.gateway_messages import VotedRequest, VoteResult
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call, call_raw
from hatp_mcp.mcp.gateway_client import McpApprover
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import GATEWAY_ID, decide_as, keyring, plan
from tests.coordinators import COORDINATOR, signer
from tests.mcp.gateway_fixture import make_gateway, voter_server

pytestmark = pytest.mark.anyio

ASK = "txn-acme-0001/finance"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_HATP_MCP_40_a_held_voted_request_answers_with_the_approval_the_moment_the_humans_decide(
    tmp_path: Path, clock: FakeClock, mode: str
) -> None:
    gw = make_gateway(tmp_path, clock)
    got: list[VoteResult] = []
    with anyio.fail_after(10):  # far below the 300 s asked for: only the decision can end the hold
        async with Client(voter_server(gw), mode=mode) as client:  # type: ignore[arg-type]
            approver = McpApprover(
                client, keyring(), gateway_id=GATEWAY_ID, coordinator=COORDINATOR, signer=signer(clock)
            )
            await approver.ask(plan(), "finance")
            async with anyio.create_task_group() as tg:

                async def held() -> None:
                    req = VotedRequest(txn_id="txn-acme-0001", requirement_id="finance", wait_seconds=300)
                    got.append(await call(client, "hatp/txn/voted", req, VoteResult, 310))

                tg.start_soon(held)
                await anyio.wait_all_tasks_blocked()
                assert got == []
                await decide_as(gw, ASK, "bob", "approve")
                await decide_as(gw, ASK, "carol", "approve")
            checked = await approver.wait("txn-acme-0001", "finance", 300)  # decided: answered at once
    assert (got[0].state, got[0].vote["decision"]) == ("approved", "yes")
    assert got[0].approval is not None and got[0].approval["decision"] == "approve"
    assert checked.vote == got[0].vote and checked.approval == got[0].approval


async def test_HATP_MCP_40_a_long_poll_for_an_ask_never_made_is_refused_at_once_and_a_wait_over_300_s_refused(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            with pytest.raises(HatpError) as unknown:
                await call_raw(
                    client, "hatp/txn/voted", {"txnId": "txn-x", "requirementId": "finance", "waitSeconds": 300}, 310
                )
            with pytest.raises(HatpError) as too_long:
                await call_raw(
                    client, "hatp/txn/voted", {"txnId": "txn-x", "requirementId": "finance", "waitSeconds": 301}, 10
                )
    assert (unknown.value.rule, unknown.value.code) == ("HATP-MCP-10", "NO_SUCH_ASK")
    assert too_long.value.rule == "HATP-OBJ-3" and too_long.value.path is not None
    assert "waitSeconds" in too_long.value.path
    assert gw.store.get("txn-x/finance") is None

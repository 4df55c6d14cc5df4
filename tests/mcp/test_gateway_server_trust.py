"""The attacks on the Human Gateway's hatp/txn/* from issue #12, over an in-memory MCP client to serve_gateway: a
squatter who prepares txnId T with its own plan, and anyone withdrawing or tightening an ask. Refused with their
HATP-TRUST rule; no ask is opened, withdrawn or changed and no txnId is bound (spec/mcp-binding.md HATP-TRUST-1..8).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.core.model.estimate import TightenRequest
from hatp_mcp.core.model.gateway_messages import VoteResult
from hatp_mcp.core.model.messages import AbortRequest, PrepareRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call, call_raw
from hatp_mcp.mcp.gateway_client import mcp_approver
from hatp_mcp.mcp.gateway_server import serve_gateway
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator_trust import TrustedCoordinators
from hatp_mcp.runtime.gateway.driver import GatewayApprover, RecordingNotifier
from tests.acme_org import GATEWAY_ID, keyring, plan
from tests.coordinators import COORDINATOR, KEY, OTHER, OTHER_KEY, signer, trust_ring
from tests.mcp.gateway_fixture import make_gateway

pytestmark = pytest.mark.anyio
ASK = "txn-acme-0001/finance"


def ask_params(p: Plan, who: str = COORDINATOR) -> dict[str, Any]:
    return PrepareRequest(txn_id=p.txn_id, branch_id="finance", plan_digest=p.digest(), plan=p, coordinator=who).wire()


def squatters_plan() -> Plan:
    """Same txnId as the real plan, another plan (another amount): what a squatter would have people approve."""
    raw = plan().wire()
    raw["branches"][0]["args"] = {"memo": "pay the squatter"}
    return Plan.model_validate(raw)


async def refusal(client: Client, method: str, params: dict[str, Any]) -> HatpError:
    with pytest.raises(HatpError) as err:
        await call_raw(client, method, params, 5)
    return err.value


def server_with(gw: GatewayApprover, trust: TrustedCoordinators) -> MCPServer:
    server = MCPServer("gateway", log_level="WARNING")
    serve_gateway(server, gw, trust=trust)
    return server


async def test_HATP_TRUST_1_a_squatter_preparing_the_txn_with_its_own_plan_opens_no_ask_and_binds_nothing(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    trust = TrustedCoordinators(trust_ring(), clock)
    with anyio.fail_after(10):
        async with Client(server_with(gw, trust)) as client:
            squat = await refusal(client, "hatp/txn/prepare", ask_params(squatters_plan()))
            assert gw.store.asks() == [] and trust.bindings.get("txn-acme-0001") is None
            assert isinstance(gw.notifier, RecordingNotifier) and gw.notifier.delivered == []  # nobody was asked
            real = await mcp_approver(
                client, keyring(), gateway_id=GATEWAY_ID, coordinator=COORDINATOR, signer=signer(clock)
            ).ask(plan(), "finance")
    assert (squat.rule, squat.code) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")
    assert real.vote["decision"] == "pending" and real.vote["planDigest"] == plan().digest()  # about the real plan


async def test_HATP_TRUST_5_a_second_trusted_coordinator_cannot_squat_a_txn_the_gateway_was_asked_about(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    trust = TrustedCoordinators(trust_ring((COORDINATOR, KEY), (OTHER, OTHER_KEY)), clock)
    other = signer(clock, OTHER, OTHER_KEY)
    with anyio.fail_after(10):
        async with Client(server_with(gw, trust)) as client:
            await call(
                client,
                "hatp/txn/prepare",
                PrepareRequest.model_validate(ask_params(plan())),
                VoteResult,
                5,
                signer(clock),
            )
            before = gw.store.get(ASK)
            squat = await refusal(client, "hatp/txn/prepare", other("prepare", ask_params(squatters_plan(), OTHER)))
            abort = AbortRequest(txn_id="txn-acme-0001", branch_id="finance", plan_digest=plan().digest())
            withdraw = await refusal(client, "hatp/txn/abort", other("abort", abort.wire()))
            after = gw.store.get(ASK)
    for err in (squat, withdraw):
        assert (err.rule, err.code) == ("HATP-TRUST-5", "TXN_BOUND")
    assert before is not None and after == before and after.state == "pending"


async def test_HATP_TRUST_8_nobody_but_the_coordinator_withdraws_or_tightens_an_ask(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    p = plan()
    with anyio.fail_after(10):
        async with Client(server_with(gw, TrustedCoordinators(trust_ring(), clock))) as client:
            approver = mcp_approver(
                client, keyring(), gateway_id=GATEWAY_ID, coordinator=COORDINATOR, signer=signer(clock)
            )
            await approver.ask(p, "finance")
            before = gw.store.get(ASK)
            tighten = TightenRequest(
                txn_id=p.txn_id, requirement_id="finance", plan_digest=p.digest(), decide_by="2026-11-29T10:01:00Z"
            )
            shrink = await refusal(client, "hatp/txn/tighten", tighten.wire())
            abort = AbortRequest(txn_id=p.txn_id, branch_id="finance", plan_digest=p.digest()).wire()
            withdraw = await refusal(client, "hatp/txn/abort", abort)
            changed = signer(clock)("abort", abort) | {"reason": "changed after signing"}
            stale = await refusal(client, "hatp/txn/abort", changed)
            after = gw.store.get(ASK)
            await approver.withdraw(p.txn_id, "finance")  # the coordinator itself may
            withdrawn = gw.store.get(ASK)
    assert (withdraw.rule, withdraw.code) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")
    assert (shrink.rule, shrink.code) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")
    assert (stale.rule, stale.code) == ("HATP-TRUST-3", "AUTH_MISMATCH")
    assert before is not None and after == before and after.state == "pending"
    assert withdrawn is not None and withdrawn.state == "withdrawn"


async def test_HATP_TRUST_5_a_proven_prepare_whose_digest_is_not_its_plans_is_refused_and_binds_nothing(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    trust = TrustedCoordinators(trust_ring(), clock)
    wrong = {**ask_params(plan()), "planDigest": "sha256:" + "0" * 64}
    with anyio.fail_after(10):
        async with Client(server_with(gw, trust)) as client:
            err = await refusal(client, "hatp/txn/prepare", signer(clock)("prepare", wrong))
            unbound = trust.bindings.get("txn-acme-0001")
            asked = await call(
                client,
                "hatp/txn/prepare",
                PrepareRequest.model_validate(ask_params(plan())),
                VoteResult,
                5,
                signer(clock),
            )
    assert (err.rule, err.code) == ("HATP-MCP-9", "PLAN_MISMATCH")
    assert unbound is None and gw.store.get(ASK) is not None
    assert asked.vote["planDigest"] == plan().digest()

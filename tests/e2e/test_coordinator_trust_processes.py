"""Issue #12's attacks against real server processes: `servers.payments` over stdio (any MCP client preparing and
committing `card.capture`, a made-up planDigest poisoning the real commit, an abort of a txnId not yet seen) and
`servers.gateway` over streamable HTTP (a squatter's plan for the real txnId, anyone withdrawing the ask). Each is
refused with its HATP-TRUST rule and nothing happens; the real coordinator's requests then work as before
(spec/mcp-binding.md HATP-TRUST-1..8, HATP-TRUST-10)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import AbortRequest, PrepareRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.mcp.gateway_client import mcp_approver
from hatp_mcp.mcp.launch import launch_http, stdio_params
from hatp_mcp.runtime.clock import FakeClock, SystemClock
from hatp_mcp.store.txn_bindings import SqliteTxnBindings
from tests.acme_org import GATEWAY_ID, ORG_DIR, keyring
from tests.acme_org import plan as acme_plan
from tests.coordinators import COORDINATOR, commit_request, decision_event, signer, trusting
from tests.e2e.plans import keyring_of, live_plan, participant, prepare_for

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
PAYMENTS = "mcp://payments.example/hatp"


async def refusal(client: Client, method: str, params: dict[str, Any]) -> HatpError:
    with pytest.raises(HatpError) as err:
        await call_raw(client, method, params, 10)
    return err.value


async def card(client: Client) -> dict[str, Any]:
    result = await client.call_tool("card_status", {"resource": "tok_visa_4242"})
    assert result.structured_content is not None
    return dict(result.structured_content)


async def test_HATP_TRUST_1_over_stdio_no_mcp_client_captures_a_card_without_the_coordinator(tmp_path: Path) -> None:
    data = trusting(tmp_path / "payments")  # the operator pinned the test coordinator (HATP-TRUST-10)
    plan = live_plan("txn-e2e-capture")
    prep = prepare_for(plan, "pay").wire()
    made_up = "sha256:" + "9" * 64
    with anyio.fail_after(60), (tmp_path / "payments.stderr").open("w") as errlog:
        async with Client(stdio_client(stdio_params("servers.payments", data), errlog=errlog)) as client:
            before = await card(client)
            raw_prepare = await refusal(client, "hatp/txn/prepare", prep)
            raw_commit = await refusal(
                client,
                "hatp/txn/commit",
                {
                    "txnId": plan.txn_id,
                    "branchId": "pay",
                    "planDigest": plan.digest(),
                    "decision": decision_event(plan.txn_id, plan.digest()),
                },
            )
            poison = await refusal(
                client, "hatp/txn/commit", {"txnId": plan.txn_id, "branchId": "pay", "planDigest": made_up}
            )
            early_abort = await refusal(
                client, "hatp/txn/abort", {"txnId": plan.txn_id, "branchId": "pay", "planDigest": plan.digest()}
            )
            untouched = await card(client)
            status = await call_raw(client, "hatp/txn/status", {"txnId": plan.txn_id, "branchId": "pay"}, 10)
            # the real coordinator, afterwards: its prepare is not pre-aborted and its commit finds no poisoned answer
            real = participant(PAYMENTS, client, keyring_of(data))
            prepared = await real.prepare(PrepareRequest.model_validate(prep))
            pre = Preconditions.model_validate(prepared.receipt["preconditions"])
            done = await real.commit(
                commit_request(
                    prepared.vote, txn_id=plan.txn_id, branch_id="pay", plan_digest=plan.digest(), preconditions=pre
                )
            )
    for err in (raw_prepare, raw_commit, poison, early_abort):
        assert (err.rule, err.code, err.path) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN", "$.auth")
    assert untouched == before and status["state"] == "unknown"
    assert prepared.vote["decision"] == "yes" and done.receipt["outcome"] == "ok"


async def test_HATP_TRUST_6_a_payments_server_that_trusts_no_coordinator_refuses_and_says_how_to_fix_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "payments"  # no trusted-coordinators.json, no flag
    plan = live_plan("txn-e2e-untrusted")
    with anyio.fail_after(60):
        async with launch_http("servers.payments", data, ready_timeout=60) as proc, Client(proc.url) as client:
            err = await refusal(
                client, "hatp/txn/prepare", signer(SystemClock())("prepare", prepare_for(plan, "pay").wire())
            )
            charged = await card(client)
    assert (err.rule, err.code) == ("HATP-TRUST-6", "NO_TRUSTED_COORDINATOR")
    assert "--trusted-coordinators" in err.fix and str(data / "trusted-coordinators.json") in err.fix
    assert charged["state"] == "free"
    bindings = SqliteTxnBindings(data / "state.db")  # a participant keeps its bindings with its state
    assert bindings.get(plan.txn_id) is None  # nothing bound by a refused request (HATP-TRUST-8)
    bindings.close()
    assert not (data / "coordinators.db").exists()


def squatters(plan: Plan) -> Plan:
    raw = plan.wire()
    raw["branches"][0]["args"] = {"memo": "pay the squatter"}
    return Plan.model_validate(raw)


async def test_HATP_TRUST_8_over_http_a_squatter_cannot_take_the_gateways_ask_nor_anyone_withdraw_it(
    tmp_path: Path,
) -> None:
    data = trusting(tmp_path / "gateway")
    clock = FakeClock(datetime(2026, 11, 29, 10, 0, tzinfo=UTC))  # the gateway's pinned clock (--now)
    real_plan = acme_plan(txn_id="txn-e2e-squat")
    fake = squatters(real_plan)
    squat = PrepareRequest(
        txn_id=fake.txn_id, branch_id="finance", plan_digest=fake.digest(), plan=fake, coordinator=COORDINATOR
    )
    withdraw = AbortRequest(txn_id=real_plan.txn_id, branch_id="finance", plan_digest=real_plan.digest())
    with anyio.fail_after(60):
        async with launch_http(
            "servers.gateway", data, extra=["--org", str(ORG_DIR), "--now", "2026-11-29T10:00:00Z"], ready_timeout=60
        ) as proc:
            async with Client(proc.url) as client:
                squatted = await refusal(client, "hatp/txn/prepare", squat.wire())
                asks_after_squat = (await client.call_tool("list_asks", {})).structured_content
                approver = mcp_approver(
                    client, keyring(), gateway_id=GATEWAY_ID, coordinator=COORDINATOR, signer=signer(clock)
                )
                asked = await approver.ask(real_plan, "finance")
                withdrawn = await refusal(client, "hatp/txn/abort", withdraw.wire())
                still = await approver.poll(real_plan.txn_id, "finance")
    assert (squatted.rule, squatted.code) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")
    assert asks_after_squat is not None and json.dumps(asks_after_squat).count("txn-e2e-squat") == 0
    assert asked.vote["decision"] == "pending" and asked.vote["planDigest"] == real_plan.digest()
    assert (withdrawn.rule, withdrawn.code) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")
    assert still.vote == asked.vote  # the ask is pending as before: nobody withdrew it

"""serve_gateway over an in-memory MCP client: the gateway votes on hatp/txn/prepare, answers hatp/txn/voted and
withdraws on hatp/txn/abort; refusals are JSON-RPC errors carrying the rule (HATP-MCP-9, HATP-MCP-10)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.gateway_messages import VotedRequest, VoteResult
from hatp_mcp.core.model.messages import AbortRequest, PrepareRequest
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call, call_raw
from hatp_mcp.mcp.extension import read_advertisement
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import GATEWAY_ID, decide_as, h, keyring, plan
from tests.coordinators import COORDINATOR, signer
from tests.mcp.gateway_fixture import make_gateway, voter_server

pytestmark = pytest.mark.anyio


def prepare_req(requirement: str = "finance", **changes: object) -> PrepareRequest:
    p = plan()
    req = PrepareRequest(
        txn_id=p.txn_id, branch_id=requirement, plan_digest=p.digest(), plan=p, coordinator=COORDINATOR
    )
    return req.model_copy(update=changes)


async def test_HATP_MCP_9_prepare_on_the_gateway_returns_its_signed_pending_vote_and_then_the_approval(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            caps = read_advertisement(client.server_capabilities, "gateway")
            first = await call(client, "hatp/txn/prepare", prepare_req(), VoteResult, sign=signer(clock))
            again = await call(client, "hatp/txn/prepare", prepare_req(), VoteResult, sign=signer(clock))
            await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
            await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
            done = await call(
                client, "hatp/txn/voted", VotedRequest(txn_id="txn-acme-0001", requirement_id="finance"), VoteResult
            )
    assert caps["roles"] == ["gateway"] and caps["keys"][0]["kid"] == "acme.com-gateway-test-only"
    assert (first.state, first.vote["decision"], first.vote["decideBy"], first.approval) == (
        "pending",
        "pending",
        "2026-11-29T14:00:00Z",
        None,
    )
    assert again.vote == first.vote
    assert verify_raw(first.vote, keyring(), role="gateway") == "acme.com-gateway-test-only"
    assert (done.state, done.vote["decision"], done.vote["voter"]) == ("approved", "yes", GATEWAY_ID)
    assert done.approval is not None and done.approval["decision"] == "approve"
    assert [d["approver"] for d in done.approval["decisions"]] == [h("bob"), h("carol")]


async def test_HATP_MCP_9_a_plan_digest_that_is_not_the_plans_is_refused_and_nothing_is_asked(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    wrong = prepare_req(plan_digest="sha256:" + "0" * 64)
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            with pytest.raises(HatpError) as err:
                await call(client, "hatp/txn/prepare", wrong, VoteResult, sign=signer(clock))
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MCP-9", "PLAN_MISMATCH", "$.planDigest")
    assert gw.store.asks() == []


async def test_HATP_MCP_9_the_gateway_refuses_a_quote(tmp_path: Path, clock: FakeClock) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            with pytest.raises(HatpError) as err:
                await call(client, "hatp/txn/prepare", prepare_req(quote_only=True), VoteResult, sign=signer(clock))
    assert (err.value.rule, err.value.code) == ("HATP-MCP-9", "UNSUPPORTED")
    assert gw.store.asks() == []


async def test_a_requirement_the_plan_does_not_have_is_a_signed_no_vote_not_an_error(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            got = await call(client, "hatp/txn/prepare", prepare_req("legal"), VoteResult, sign=signer(clock))
    assert (got.state, got.vote["decision"], got.vote["code"]) == ("refused", "no", "HATP-GW-11")
    verify_raw(got.vote, keyring(), role="gateway")


async def test_HATP_MCP_10_polling_an_ask_never_made_is_refused_not_answered_with_a_vote(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            with pytest.raises(HatpError) as err:
                await call_raw(client, "hatp/txn/voted", {"txnId": "txn-nope", "requirementId": "finance"}, 5)
            with pytest.raises(HatpError) as bad:
                await call_raw(client, "hatp/txn/voted", {"txnId": "txn-nope"}, 5)
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MCP-10", "NO_SUCH_ASK", "$.requirementId")
    assert bad.value.rule.startswith("HATP-OBJ-") and "requirementId" in bad.value.path
    assert gw.store.asks() == []


async def test_HATP_MCP_10_abort_withdraws_a_pending_ask_and_keeps_a_decided_one(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    req = prepare_req()
    other = plan(txn_id="txn-acme-0002")
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            await call(client, "hatp/txn/prepare", req, VoteResult, sign=signer(clock))
            wrong = AbortRequest(txn_id=req.txn_id, branch_id="finance", plan_digest="sha256:" + "1" * 64)
            with pytest.raises(HatpError) as mismatch:
                await call(client, "hatp/txn/abort", wrong, VoteResult, sign=signer(clock))
            still = gw.store.get("txn-acme-0001/finance")
            abort = AbortRequest(txn_id=req.txn_id, branch_id="finance", plan_digest=req.plan_digest)
            withdrawn = await call(client, "hatp/txn/abort", abort, VoteResult, sign=signer(clock))
            await call(
                client,
                "hatp/txn/prepare",
                PrepareRequest(
                    txn_id=other.txn_id,
                    branch_id="finance",
                    plan_digest=other.digest(),
                    plan=other,
                    coordinator=COORDINATOR,
                ),
                VoteResult,
                sign=signer(clock),
            )
            await decide_as(gw, "txn-acme-0002/finance", "bob", "reject")
            kept = await call(
                client,
                "hatp/txn/abort",
                AbortRequest(txn_id=other.txn_id, branch_id="finance", plan_digest=other.digest()),
                VoteResult,
                sign=signer(clock),
            )
            with pytest.raises(HatpError) as unknown:
                await call(
                    client,
                    "hatp/txn/abort",
                    abort.model_copy(update={"txn_id": "txn-x"}),
                    VoteResult,
                    sign=signer(clock),
                )
    # the transaction is bound to the plan it was asked about (HATP-TRUST-5), before HATP-MCP-10 looks at the ask
    assert (mismatch.value.rule, mismatch.value.code) == ("HATP-TRUST-5", "TXN_BOUND")
    assert still is not None and still.state == "pending"
    assert (withdrawn.state, withdrawn.vote["decision"], withdrawn.vote["code"]) == ("withdrawn", "no", "WITHDRAWN")
    assert (kept.state, kept.vote["decision"]) == ("rejected", "no")
    assert kept.approval is not None and kept.approval["decision"] == "reject"
    assert (unknown.value.rule, unknown.value.code) == ("HATP-MCP-10", "NO_SUCH_ASK")

"""hatp/txn/estimate and hatp/txn/tighten between a coordinator (mcp_approver) and the gateway (serve_gateway),
in memory: signed estimates, deadlines that only shrink, terms bound into the signed approval (HATP-MCP-17/18)."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.core.gateway.proof import sign_decision, subject_digest
from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.estimate import EstimateRequest, TightenRequest
from hatp_mcp.core.model.gateway_messages import VoteResult
from hatp_mcp.core.model.messages import PrepareRequest
from hatp_mcp.core.model.terms import ApprovalTerms, HoldTerm
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call, call_raw
from hatp_mcp.mcp.gateway_client import check_tightened, mcp_approver
from hatp_mcp.mcp.gateway_server import vote_result
from hatp_mcp.mcp.hatp_methods import add_method, lowlevel_of
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.interfaces import ApproverAnswer
from tests.acme_org import GATEWAY_ID, gateway_key, h, human_key, keyring, plan, proof
from tests.coordinators import COORDINATOR, signer
from tests.core.gateway.test_terms import held_plan
from tests.mcp.gateway_fixture import make_gateway, voter_server

pytestmark = pytest.mark.anyio

TERMS = ApprovalTerms(
    decide_by="2026-11-29T11:50:00Z",
    holds=[HoldTerm(branch_id="seat", lease_expires_at="2026-11-29T10:15:00Z", hold_horizon="2026-11-29T12:00:00Z")],
)


async def test_HATP_MCP_17_the_gateway_answers_a_signed_estimate_the_coordinator_checks(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    p = plan(["25000"])
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            est = await mcp_approver(
                client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
            ).estimate(p, "finance")
            req = EstimateRequest(txn_id=p.txn_id, requirement_id="finance", plan_digest=plan(["1"]).digest(), plan=p)
            with pytest.raises(HatpError) as err:
                await call_raw(client, "hatp/txn/estimate", req.wire(), 10)
    assert (est.worst_seconds, est.decide_by, est.plan_digest) == (7200, "2026-11-29T14:00:00Z", p.digest())
    assert est.order[0].human == "human://acme.com/bob"
    assert (err.value.rule, err.value.code) == ("HATP-MCP-17", "PLAN_MISMATCH")
    assert gw.store.get("txn-acme-0001/finance") is None  # an estimate asks nobody


async def test_HATP_MCP_17_an_estimate_signed_by_another_key_or_about_another_plan_is_refused(
    tmp_path: Path, clock: FakeClock
) -> None:
    impostor = make_gateway(tmp_path / "x", clock, key=SigningKey.generate(["gateway"]))
    p = plan(["25000"])
    liar = MCPServer("liar", log_level="WARNING")

    async def other_plan(req: EstimateRequest) -> WireModel:
        est = await make_gateway(tmp_path / "y", clock).estimate(plan(["5000"]), "finance")
        return est

    add_method(lowlevel_of(liar), "hatp/txn/estimate", EstimateRequest, other_plan, anyio.Semaphore(4))
    with anyio.fail_after(10):
        async with Client(voter_server(impostor)) as client:
            with pytest.raises(HatpError) as forged:
                await mcp_approver(client, keyring(), coordinator=COORDINATOR, signer=signer(clock)).estimate(
                    p, "finance"
                )
        async with Client(liar) as client:
            with pytest.raises(HatpError) as mismatch:
                await mcp_approver(client, keyring(), coordinator=COORDINATOR, signer=signer(clock)).estimate(
                    p, "finance"
                )
    assert (forged.value.rule, forged.value.code) == ("HATP-MCP-11", "SIGNATURE_INVALID")
    assert (mismatch.value.rule, mismatch.value.code, mismatch.value.path) == (
        "HATP-MCP-11",
        "EVIDENCE_MISMATCH",
        "$.planDigest",
    )


async def test_HATP_MCP_18_tighten_shrinks_the_ask_and_the_humans_approve_under_the_terms_sent(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    p = held_plan()
    ask_id = f"{p.txn_id}/finance"
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            approver = mcp_approver(
                client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
            )
            await approver.ask(p, "finance")
            tightened = await approver.tighten(p.txn_id, "finance", TERMS)
            stored = gw.store.get(ask_id)
            assert stored is not None and stored.record is not None
            asked = next(s.human for s in stored.record.seats if s.status == "asked").removeprefix("human://acme.com/")
            signed = proof(stored.record.ask, asked, "approve", clock.now())
            with pytest.raises(HatpError) as untermed:  # signed without the terms: HATP-GW-32
                await gw.decide(ask_id, signed)
            await gw.decide(ask_id, _with_terms(stored.record.ask, asked, clock))
            done = await approver.poll(p.txn_id, "finance")
    assert tightened.vote["decision"] == "pending" and tightened.vote["decideBy"] == "2026-11-29T11:50:00Z"
    assert untermed.value.rule == "HATP-GW-32"
    assert done.approval is not None and done.approval["terms"] == TERMS.wire()
    assert done.approval["decisions"][0]["proof"]["terms"] == TERMS.wire()
    assert done.approval["expiresAt"] == "2026-11-29T11:50:00Z"
    check_tightened(done, TERMS)


def _with_terms(ask: Any, name: str, clock: FakeClock) -> dict[str, Any]:
    """`name`'s approval signed over the ask's terms, as a person's device signs what it shows."""
    nonce = secrets.token_urlsafe(18)
    return sign_decision(
        human_key(name), ask.ask_id, subject_digest(ask), h(name), "approve", clock.now(), nonce=nonce, terms=ask.terms
    ).wire()


async def test_HATP_MCP_18_tighten_of_an_unknown_ask_or_another_plan_or_a_later_deadline_is_refused(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    p = held_plan()
    later = TightenRequest(
        txn_id=p.txn_id, requirement_id="finance", plan_digest=p.digest(), decide_by="2026-11-29T15:00:00Z"
    )
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            with pytest.raises(HatpError) as unknown:
                await call(client, "hatp/txn/tighten", later, VoteResult, 10, signer(clock))
            await mcp_approver(client, keyring(), coordinator=COORDINATOR, signer=signer(clock)).ask(p, "finance")
            before = gw.store.get(f"{p.txn_id}/finance")
            other = later.model_copy(update={"plan_digest": plan().digest(), "decide_by": "2026-11-29T11:00:00Z"})
            with pytest.raises(HatpError) as mismatch:
                await call(client, "hatp/txn/tighten", other, VoteResult, 10, signer(clock))
            with pytest.raises(HatpError) as extended:
                await call(client, "hatp/txn/tighten", later, VoteResult, 10, signer(clock))
    assert (unknown.value.rule, unknown.value.code) == ("HATP-MCP-10", "NO_SUCH_ASK")
    # the transaction is bound to the plan it was asked about (HATP-TRUST-5), before HATP-MCP-18 looks at the ask
    assert (mismatch.value.rule, mismatch.value.code) == ("HATP-TRUST-5", "TXN_BOUND")
    assert (extended.value.rule, extended.value.code) == ("HATP-GW-30", "DEADLINE_EXTENDED")
    assert gw.store.get(f"{p.txn_id}/finance") == before


def test_HATP_MCP_18_a_pending_vote_with_another_deadline_or_an_approval_over_other_terms_is_refused() -> None:
    vote = {"decision": "pending", "decideBy": "2026-11-29T14:00:00Z"}
    with pytest.raises(HatpError) as late:
        check_tightened(ApproverAnswer(vote=vote, approval=None), TERMS)
    approval = sign_object({"decision": "approve", "terms": {"decideBy": "2026-11-29T11:50:00Z"}}, gateway_key())
    with pytest.raises(HatpError) as other:
        check_tightened(ApproverAnswer(vote={"decision": "yes"}, approval=approval), TERMS)
    assert (late.value.rule, late.value.code, late.value.path) == (
        "HATP-MCP-18",
        "EVIDENCE_MISMATCH",
        "$.vote.decideBy",
    )
    assert (other.value.rule, other.value.path) == ("HATP-MCP-18", "$.approval.terms")


async def test_HATP_MCP_29_the_first_ask_already_carries_the_terms_so_no_one_is_notified_without_them(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    p = held_plan()
    ask_id = f"{p.txn_id}/finance"
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            answer = await mcp_approver(
                client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
            ).ask(p, "finance", TERMS)
            stored = gw.store.get(ask_id)
            assert stored is not None and stored.record is not None
            asked = next(s.human for s in stored.record.seats if s.status == "asked").removeprefix("human://acme.com/")
            await gw.decide(ask_id, _with_terms(stored.record.ask, asked, clock))  # decided at once: no tighten came
            done = await mcp_approver(
                client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
            ).poll(p.txn_id, "finance")
    assert answer.vote["decision"] == "pending" and answer.vote["decideBy"] == TERMS.decide_by
    assert stored.record.ask.terms == TERMS  # bound from the first ask on
    notified = gw.notifier.delivered  # type: ignore[attr-defined]
    assert notified and all(ask.terms == TERMS for _h, _c, ask in notified)
    assert done.approval is not None and done.approval["terms"] == TERMS.wire()
    check_tightened(done, TERMS)


async def test_HATP_MCP_29_an_ask_whose_answer_drops_the_terms_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    gw = make_gateway(tmp_path, clock)
    p = held_plan()
    forgetful = MCPServer("forgetful", log_level="WARNING")

    async def ignore_terms(req: PrepareRequest) -> WireModel:  # a gateway that asks without the terms
        await gw.ask(req.plan, req.branch_id)
        stored = gw.store.get(f"{req.txn_id}/{req.branch_id}")
        assert stored is not None
        return vote_result(req.txn_id, req.branch_id, stored)

    add_method(lowlevel_of(forgetful), "hatp/txn/prepare", PrepareRequest, ignore_terms, anyio.Semaphore(4))
    with anyio.fail_after(10):
        async with Client(forgetful) as client:
            with pytest.raises(HatpError) as err:
                await mcp_approver(
                    client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
                ).ask(p, "finance", TERMS)
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MCP-18", "EVIDENCE_MISMATCH", "$.vote.decideBy")

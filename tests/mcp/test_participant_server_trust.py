"""The attacks on a participant's hatp/txn/* from issue #12, over an in-memory MCP client to serve_hatp: any client
could prepare and commit, poison a commit's answer with a made-up planDigest, or abort a txnId before the real
coordinator prepared it. Each is refused with its HATP-TRUST rule and leaves nothing behind: no effect, no stored
answer, no bound txnId (spec/mcp-binding.md HATP-TRUST-1..8)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from hatp_mcp.core.model.messages import CommitRequest, PrepareRequest, StatusRequest
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.mcp.call import HatpRequest, Signer, call_raw
from hatp_mcp.mcp.hatp_methods import AnyParams
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator_trust import TrustedCoordinators
from tests.coordinators import COORDINATOR, KEY, OTHER, OTHER_KEY, decision_for, signer, trust_ring
from tests.mcp.toy import AIRLINE, Toy, plan, toy_server

pytestmark = pytest.mark.anyio


async def send(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    result = await client.session.send_request(HatpRequest(method=method, params=params), AnyParams)
    return dict(result.model_extra or {})


def prepare_params(txn: str = "txn-toy-0001", who: str = COORDINATOR) -> dict[str, Any]:
    p = plan(txn)
    return PrepareRequest(txn_id=txn, branch_id="seat", plan_digest=p.digest(), plan=p, coordinator=who).wire()


def commit_params(
    txn: str = "txn-toy-0001", plan_digest: str | None = None, vote: dict[str, Any] | None = None
) -> dict[str, Any]:
    p = plan(txn)
    req = CommitRequest(
        txn_id=txn,
        branch_id="seat",
        plan_digest=plan_digest or p.digest(),
        decision=decision_for(p),
        vote_digest=digest(vote) if vote is not None else "sha256:" + "0" * 64,
    )
    return req.wire()


async def refused(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    with pytest.raises(MCPError) as err:
        await send(client, method, params)
    data: dict[str, Any] = err.value.error.data
    assert err.value.message.startswith(f"{data['code']}: refused under {data['rule']}")  # HATP-MCP-3
    return data


def untouched(toy: Toy, txn: str = "txn-toy-0001") -> None:
    """Nothing happened: no hold, no booking, no branch row (so no cached answer), no bound txnId."""
    assert (toy.op.held, toy.op.booked) == (set(), set())
    assert toy.runtime.store.get(txn, "seat") is None
    assert toy.trust.bindings.get(txn) is None


async def test_HATP_TRUST_1_any_mcp_client_preparing_and_committing_without_a_coordinator_is_refused(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            prep = await refused(client, "hatp/txn/prepare", prepare_params())
            quote = await refused(client, "hatp/txn/quote", prepare_params())
            commit = await refused(client, "hatp/txn/commit", commit_params())
            branch = {"txnId": "txn-toy-0001", "branchId": "seat", "planDigest": plan().digest()}
            abort = await refused(client, "hatp/txn/abort", branch)
            undo = await refused(client, "hatp/txn/compensate", branch)
            renew = await refused(
                client,
                "hatp/txn/renew",
                {"txnId": "txn-toy-0001", "branchId": "seat", "planDigest": plan().digest(), "leaseSeconds": 60},
            )
            status = await send(client, "hatp/txn/status", {"txnId": "txn-toy-0001", "branchId": "seat"})
    for data in (prep, quote, commit, abort, undo, renew):
        assert (data["rule"], data["code"], data["path"]) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN", "$.auth")
    assert status["state"] == "unknown"  # status changes nothing and needs no proof
    untouched(toy)


async def test_HATP_TRUST_8_a_forged_commit_with_a_made_up_plan_digest_leaves_no_answer_for_the_real_commit(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    real = mcp_participant(AIRLINE, None, toy.keyring, signer=toy.signer)  # type: ignore[arg-type]
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            real.client = client
            prepared = await real.prepare(PrepareRequest.model_validate(prepare_params()))
            forged = await refused(client, "hatp/txn/commit", commit_params(plan_digest="sha256:" + "9" * 64))
            row_after_forgery = toy.runtime.store.get("txn-toy-0001", "seat")
            done = await real.commit(CommitRequest.model_validate(commit_params(vote=prepared.vote)))
    assert prepared.vote["decision"] == "yes"
    assert (forged["rule"], forged["code"]) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")
    assert row_after_forgery is not None and "commit" not in row_after_forgery.answers  # nothing cached
    assert done.receipt["outcome"] == "ok" and toy.op.booked == {"txn-toy-0001"}


async def test_HATP_TRUST_8_an_unproven_abort_of_an_unseen_txn_does_not_make_the_real_prepare_vote_no(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    abort = {"txnId": "txn-toy-0001", "branchId": "seat", "planDigest": plan().digest()}
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            data = await refused(client, "hatp/txn/abort", abort)
            untouched(toy)
            vote = await mcp_participant(AIRLINE, client, toy.keyring, signer=toy.signer).prepare(
                PrepareRequest.model_validate(prepare_params())
            )
    assert (data["rule"], data["code"]) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")
    assert vote.vote["decision"] == "yes" and toy.op.held == {"txn-toy-0001"}


async def test_HATP_TRUST_2_a_coordinator_signing_with_a_key_the_operator_did_not_pin_is_refused(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    stranger: Signer = signer(clock, OTHER, OTHER_KEY)  # a real coordinator, just not one this participant trusts
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            data = await refused(client, "hatp/txn/prepare", stranger("prepare", prepare_params(who=OTHER)))
    assert (data["rule"], data["code"]) == ("HATP-TRUST-2", "COORDINATOR_UNPROVEN")
    assert data["reason"].startswith("HATP-SIG-2")
    untouched(toy)


async def test_HATP_TRUST_5_another_trusted_coordinator_cannot_take_over_a_bound_transaction(clock: FakeClock) -> None:
    toy = Toy(clock)
    toy.trust = TrustedCoordinators(trust_ring((COORDINATOR, KEY), (OTHER, OTHER_KEY)), clock)
    other: Signer = signer(clock, OTHER, OTHER_KEY)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            mine = await send(client, "hatp/txn/prepare", toy.signer("prepare", prepare_params()))
            abort = {"txnId": "txn-toy-0001", "branchId": "seat", "planDigest": plan().digest()}
            taken = await refused(client, "hatp/txn/abort", other("abort", abort))
            squat = await refused(client, "hatp/txn/prepare", other("prepare", prepare_params(who=OTHER)))
            row = toy.runtime.store.get("txn-toy-0001", "seat")
    assert mine["vote"]["decision"] == "yes"
    for data in (taken, squat):
        assert (data["rule"], data["code"]) == ("HATP-TRUST-5", "TXN_BOUND")
    assert row is not None and row.state == "prepared" and "abort" not in row.answers
    assert toy.op.held == {"txn-toy-0001"}
    bound = toy.trust.bindings.get("txn-toy-0001")
    assert bound is not None and bound.coordinator == COORDINATOR


async def test_HATP_TRUST_7_a_proven_commit_without_the_decision_is_refused_and_nothing_is_cached(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            await send(client, "hatp/txn/prepare", toy.signer("prepare", prepare_params()))
            bare = {k: v for k, v in commit_params().items() if k != "decision"}
            data = await refused(client, "hatp/txn/commit", toy.signer("commit", bare))
            row = toy.runtime.store.get("txn-toy-0001", "seat")
    assert (data["rule"], data["code"], data["path"]) == ("HATP-TRUST-7", "DECISION_UNPROVEN", "$.decision")
    assert row is not None and row.state == "prepared" and "commit" not in row.answers
    assert toy.op.booked == set()


async def test_HATP_TRUST_3_a_quotes_auth_replayed_as_a_prepare_places_no_hold(clock: FakeClock) -> None:
    toy = Toy(clock)
    quoted = toy.signer("quote", {**prepare_params(), "quoteOnly": True})
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            as_prepare = await refused(client, "hatp/txn/prepare", {**quoted, "quoteOnly": False})
            same_method_wrong_name = await refused(client, "hatp/txn/prepare", quoted)
    assert (as_prepare["rule"], as_prepare["code"]) == ("HATP-TRUST-3", "AUTH_MISMATCH")
    assert (same_method_wrong_name["rule"], same_method_wrong_name["path"]) == ("HATP-TRUST-3", "$.auth.method")
    untouched(toy)


async def test_HATP_TRUST_6_a_participant_that_trusts_no_coordinator_refuses_even_a_signed_request(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    toy.trust = TrustedCoordinators(None, clock, where="/srv/airline/trusted-coordinators.json")
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            data = await refused(client, "hatp/txn/prepare", toy.signer("prepare", prepare_params()))
            status = await call_raw(client, "hatp/txn/status", StatusRequest(txn_id="t", branch_id="seat").wire(), 5)
    assert (data["rule"], data["code"]) == ("HATP-TRUST-6", "NO_TRUSTED_COORDINATOR")
    assert "--trusted-coordinators" in data["fix"] and "/srv/airline/trusted-coordinators.json" in data["fix"]
    assert status["state"] == "unknown"
    untouched(toy)


async def test_HATP_TRUST_7_a_commit_resting_on_another_vote_than_the_branchs_own_is_refused_and_nothing_is_kept(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    stale = {"type": "hatp.vote", "decision": "yes", "note": "a vote this participant never gave"}
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            prepared = await send(client, "hatp/txn/prepare", toy.signer("prepare", prepare_params()))
            data = await refused(client, "hatp/txn/commit", toy.signer("commit", commit_params(vote=stale)))
            row = toy.runtime.store.get("txn-toy-0001", "seat")
            booked_after_refusal = set(toy.op.booked)
            done = await send(client, "hatp/txn/commit", toy.signer("commit", commit_params(vote=prepared["vote"])))
    assert (data["rule"], data["code"], data["path"]) == ("HATP-TRUST-7", "VOTE_MISMATCH", "$.voteDigest")
    assert row is not None and row.state == "prepared" and "commit" not in row.answers
    assert booked_after_refusal == set()
    assert done["receipt"]["outcome"] == "ok" and toy.op.booked == {"txn-toy-0001"}

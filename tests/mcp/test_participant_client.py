"""mcp_participant over an in-memory MCP client: the Participant Protocol, validated and signature-checked."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import AbortRequest, CommitRequest, PrepareRequest, StatusRequest
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.hatp_methods import AnyParams
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.runtime.clock import FakeClock
from tests.coordinators import COORDINATOR, decision_for
from tests.mcp.toy import AIRLINE, Toy, plan, toy_server

pytestmark = pytest.mark.anyio


def prepare_req(txn: str = "txn-toy-0001", quote: bool = False) -> PrepareRequest:
    p = plan(txn)
    return PrepareRequest(
        txn_id=txn, branch_id="seat", plan_digest=p.digest(), plan=p, coordinator=COORDINATOR, quote_only=quote
    )


async def test_a_prepare_over_mcp_returns_the_participants_signed_yes_vote_and_places_the_hold(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            part = mcp_participant(AIRLINE, client, toy.keyring, signer=toy.signer)
            result = await part.prepare(prepare_req())
    assert result.vote["decision"] == "yes"
    assert result.vote["signature"]["kid"] == toy.key.kid
    assert result.receipt["leaseExpiresAt"] == "2026-11-29T10:15:00Z"
    assert toy.op.held == {"txn-toy-0001"}


async def test_prepare_then_commit_books_the_seat_and_a_repeated_commit_gets_the_first_receipt(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    req = prepare_req()
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            part = mcp_participant(AIRLINE, client, toy.keyring, signer=toy.signer)
            prepared = await part.prepare(req)
            commit = CommitRequest(
                txn_id=req.txn_id,
                branch_id="seat",
                plan_digest=req.plan_digest,
                preconditions=Preconditions.model_validate(prepared.receipt["preconditions"]),
                decision=decision_for(req.plan),
                vote_digest=digest(prepared.vote),
            )
            first = await part.commit(commit)
            again = await part.commit(commit)
            status = await part.status(StatusRequest(txn_id=req.txn_id, branch_id="seat"))
    assert first.receipt["outcome"] == "ok"
    assert again.receipt == first.receipt
    assert status.state == "committed"
    assert toy.op.booked == {"txn-toy-0001"}


async def test_a_quote_places_no_hold(clock: FakeClock) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            result = await mcp_participant(AIRLINE, client, toy.keyring, signer=toy.signer).prepare(
                prepare_req(quote=True)
            )
    assert result.receipt["phase"] == "quote"
    assert "validUntil" in result.receipt
    assert toy.op.held == set()


async def test_an_abort_releases_the_hold(clock: FakeClock) -> None:
    toy = Toy(clock)
    req = prepare_req()
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            part = mcp_participant(AIRLINE, client, toy.keyring, signer=toy.signer)
            await part.prepare(req)
            result = await part.abort(AbortRequest(txn_id=req.txn_id, branch_id="seat", plan_digest=req.plan_digest))
    assert result.receipt["phase"] == "abort"
    assert toy.op.held == set()


async def test_HATP_MCP_4_evidence_signed_by_a_key_outside_the_keyring_is_refused(clock: FakeClock) -> None:
    toy = Toy(clock)
    stranger = Keyring()
    stranger.add_signer(SigningKey.generate(["participant"]))
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            with pytest.raises(HatpError) as info:
                await mcp_participant(AIRLINE, client, stranger, signer=toy.signer).prepare(prepare_req())
    assert info.value.rule == "HATP-MCP-4"
    assert info.value.code == "SIGNATURE_INVALID"
    assert info.value.path == "$.vote.signature.kid"


async def test_HATP_MCP_4_evidence_from_another_participant_uri_is_refused(clock: FakeClock) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            part = mcp_participant("mcp://impostor.example/hatp", client, toy.keyring, signer=toy.signer)
            with pytest.raises(HatpError) as info:
                await part.prepare(prepare_req())
    assert (info.value.rule, info.value.code) == ("HATP-MCP-4", "EVIDENCE_MISMATCH")


async def test_HATP_MCP_2_a_result_that_is_not_the_wire_model_is_refused(clock: FakeClock) -> None:
    toy = Toy(clock)
    server = toy_server(toy)

    async def lying(ctx: Any, params: Any) -> dict[str, Any]:
        return {"type": "hatp.prepare-result", "vote": {}, "receipt": {}, "bonus": 1}

    server._lowlevel_server.add_request_handler("hatp/txn/prepare", AnyParams, lying)
    with anyio.fail_after(10):
        async with Client(server) as client:
            with pytest.raises(HatpError) as info:
                await mcp_participant(AIRLINE, client, toy.keyring, signer=toy.signer).prepare(prepare_req())
    assert (info.value.rule, info.value.code, info.value.path) == ("HATP-MCP-2", "BAD_RESULT", "bonus")

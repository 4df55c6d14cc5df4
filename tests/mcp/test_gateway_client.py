"""mcp_approver over an in-memory MCP client: the coordinator's Approver, with every vote and approval checked
against the organisation's gateway keys and against what was asked (HATP-MCP-11)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.gateway_messages import VoteResult
from hatp_mcp.core.model.messages import PrepareRequest
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.gateway_client import mcp_approver
from hatp_mcp.mcp.hatp_methods import add_method, lowlevel_of
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import GATEWAY_ID, decide_as, gateway_key, keyring, plan
from tests.coordinators import COORDINATOR, signer
from tests.mcp.gateway_fixture import make_gateway, voter_server

pytestmark = pytest.mark.anyio


async def test_ask_poll_and_withdraw_over_mcp_give_the_coordinator_checked_answers(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    p, q = plan(), plan(txn_id="txn-acme-0002")
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            approver = mcp_approver(
                client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
            )
            pending = await approver.ask(p, "finance")
            await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
            await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
            done = await approver.poll(p.txn_id, "finance")
            await approver.ask(q, "finance")
            restarted = mcp_approver(
                client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
            )  # knows no digests yet
            await restarted.withdraw(q.txn_id, "finance")
            await restarted.withdraw("txn-never-asked", "finance")  # nothing to withdraw: no error
    assert pending.vote["decision"] == "pending" and pending.approval is None
    assert done.vote["decision"] == "yes" and done.approval is not None
    assert done.approval["planDigest"] == p.digest()
    withdrawn = gw.store.get("txn-acme-0002/finance")
    assert withdrawn is not None and withdrawn.state == "withdrawn"


async def test_HATP_MCP_11_a_vote_signed_by_a_key_the_organisation_does_not_publish_is_refused(
    tmp_path: Path, clock: FakeClock
) -> None:
    impostor = make_gateway(tmp_path, clock, key=SigningKey.generate(["gateway"]))
    with anyio.fail_after(10):
        async with Client(voter_server(impostor)) as client:
            with pytest.raises(HatpError) as err:
                await mcp_approver(client, keyring(), coordinator=COORDINATOR, signer=signer(clock)).ask(
                    plan(), "finance"
                )
    assert (err.value.rule, err.value.code) == ("HATP-MCP-11", "SIGNATURE_INVALID")
    assert err.value.path.startswith("$.vote")


async def test_HATP_MCP_11_a_vote_from_another_voter_than_the_organisations_gateway_is_refused(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(voter_server(gw)) as client:
            with pytest.raises(HatpError) as err:
                await mcp_approver(
                    client,
                    keyring(),
                    coordinator=COORDINATOR,
                    signer=signer(clock),
                    gateway_id="https://evil.example/gw",
                ).ask(plan(), "finance")
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MCP-11", "EVIDENCE_MISMATCH", "$.vote.voter")


def forged_gateway(answer: Callable[[PrepareRequest], dict[str, Any]]) -> MCPServer:
    """A server that answers hatp/txn/prepare with whatever `answer` builds (signed with the real gateway key)."""
    server = MCPServer("forged", log_level="WARNING")

    async def prepare(req: PrepareRequest) -> WireModel:
        return VoteResult.model_validate(answer(req))

    add_method(lowlevel_of(server), "hatp/txn/prepare", PrepareRequest, prepare, anyio.Semaphore(4))
    return server


def vote(req: PrepareRequest, **changes: Any) -> dict[str, Any]:
    body = {
        "type": "hatp.vote",
        "txnId": req.txn_id,
        "branchId": req.branch_id,
        "planDigest": req.plan_digest,
        "voter": GATEWAY_ID,
        "decision": "pending",
        "decideBy": "2026-11-29T14:00:00Z",
        "issuedAt": "2026-11-29T10:00:00Z",
    }
    body.update(changes)
    return sign_object({k: v for k, v in body.items() if v is not None}, gateway_key())


def result(req: PrepareRequest, v: dict[str, Any], approval: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {"txnId": req.txn_id, "requirementId": req.branch_id, "state": "pending", "vote": v}
    if approval is not None:
        out["approval"] = approval
    return out


@pytest.mark.parametrize(
    ("forge", "path"),
    [
        (lambda r: result(r, vote(r, branchId="legal")), "$.vote.branchId"),
        (lambda r: result(r, vote(r, planDigest="sha256:" + "2" * 64)), "$.vote.planDigest"),
        (lambda r: result(r, vote(r, txnId="txn-other")), "$.vote.txnId"),
        (lambda r: result(r, vote(r, decideBy=None)), "$.vote.decideBy"),
        (lambda r: result(r, vote(r, decision="yes", decideBy=None)), "$.approval.decision"),
        (lambda r: {**result(r, vote(r)), "requirementId": "legal"}, "$.requirementId"),
    ],
    ids=["other-requirement", "other-plan", "other-txn", "pending-unbounded", "yes-without-approval", "result-ids"],
)
async def test_HATP_MCP_11_an_answer_that_does_not_name_what_was_asked_is_refused(
    forge: Callable[[PrepareRequest], dict[str, Any]], path: str
) -> None:
    with anyio.fail_after(10):
        async with Client(forged_gateway(forge)) as client:
            with pytest.raises(HatpError) as err:
                await mcp_approver(client, keyring(), gateway_id=GATEWAY_ID).ask(plan(), "finance")
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MCP-11", "EVIDENCE_MISMATCH", path)

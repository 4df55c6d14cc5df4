"""Questions over MCP (hatp_mcp/mcp/gateway_questions.py, HATP-MCP-33), in memory on the acme.com test organisation:
the agent proves whom it asks for, the question is routed like an approval (the requester is never asked), an
answer that does not fit is never signed, a decline passes it on, and the signed Answer is fetched by askId."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.core.model.question import QuestionRequest, question_digest
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.mcp.gateway_questions import QUESTION_TOOLS, serve_gateway_questions
from hatp_mcp.mcp.gateway_tools import add_gateway_tools
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.gateway_store import StoredAsk
from tests.acme_org import agent_request, h, human_key, keyring, plan
from tests.mcp.gateway_fixture import make_gateway
from tests.mcp.test_gateway_tools import refused, signed, tool

pytestmark = pytest.mark.anyio

OPTIONS = [{"id": "adlon", "label": "Hotel Adlon"}, {"id": "motel", "label": "Motel One"}]
ROLE = "human://acme.com/role/finance-approver"
SQUAT = "txn-acme-0001/finance"  # where the approval of requirement `finance` of txn-acme-0001 is routed


def server_of(gw: GatewayApprover) -> MCPServer:
    server = MCPServer("hatp-gateway", log_level="WARNING")
    add_gateway_tools(server, gw)
    serve_gateway_questions(server, gw)
    return server


def choose(clock: FakeClock, ask_id: str = "q-hotel", address: str = ROLE, **request_over: Any) -> dict[str, Any]:
    """The ask_choose arguments with the travel-bot's signed request about exactly this question."""
    q = QuestionRequest.model_validate(
        {"askId": ask_id, "kind": "choose", "address": address, "question": "Which hotel?", "options": OPTIONS}
    )
    request = agent_request(question_digest(q), clock.now(), subject="question", **request_over)
    return {"ask_id": ask_id, "address": address, "question": "Which hotel?", "options": OPTIONS, "request": request}


async def answer(client: Client, ask_id: str, name: str, action: str, clock: FakeClock, value: Any = None) -> Any:
    proof = await signed(client, ask_id, name, action, clock.now(), value)
    return await client.call_tool("decide", {"ask_id": ask_id, "proof": proof})


async def test_HATP_MCP_33_an_agent_asks_a_question_and_fetches_the_signed_answer(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(server_of(gw)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            asked = await tool(client, "ask_choose", choose(clock))
            again = await tool(client, "ask_choose", choose(clock))  # the same question again: the same ask
            who = asked["waitingFor"][0]
            misfit = await answer(client, "q-hotel", who.rsplit("/", 1)[-1], "answer", clock, "ritz")
            before = await tool(client, "question_status", {"ask_id": "q-hotel"})
            fits = await answer(client, "q-hotel", who.rsplit("/", 1)[-1], "answer", clock, "motel")
            done = await tool(client, "question_status", {"ask_id": "q-hotel"})
    assert set(QUESTION_TOOLS) <= tools
    assert (asked["askId"], asked["kind"], asked["state"]) == ("q-hotel", "choose", "pending")
    assert again["askId"] == "q-hotel" and again["waitingFor"] == asked["waitingFor"]
    assert h("dana") not in asked["waitingFor"]  # the agent acts for dana: she is never asked (HATP-GW-5)
    seats = {s["human"]: s["status"] for s in asked["seats"]}
    assert seats[h("dana")] == "excluded" and asked["ask"]["requester"] == h("dana")
    assert misfit.is_error and "HATP-ASK-2" in misfit.content[0].text  # type: ignore[union-attr]
    assert before["state"] == "pending" and "answer" not in before  # nothing signed for an answer that did not fit
    assert not fits.is_error
    signed_answer = done["answer"]
    assert done["state"] == "answered" and signed_answer["value"] == "motel" and signed_answer["answerer"] == who
    verify_raw(signed_answer, keyring(), role="gateway")


async def test_HATP_MCP_33_a_decline_passes_the_question_to_the_next_person(tmp_path: Path, clock: FakeClock) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(server_of(gw)) as client:
            asked = await tool(client, "ask_choose", choose(clock))
            first = asked["waitingFor"][0]
            declined = await answer(client, "q-hotel", first.rsplit("/", 1)[-1], "decline", clock)
            after = await tool(client, "question_status", {"ask_id": "q-hotel"})
    assert not declined.is_error
    assert after["state"] == "pending" and after["waitingFor"] and first not in after["waitingFor"]


@pytest.mark.parametrize(
    ("over", "rule"),
    [
        ({"acts_for": h("bob")}, "HATP-GW-48"),  # the agent claims to act for someone its card does not name
        ({"key": human_key("bob")}, "HATP-GW-47"),  # signed with a key that is not on the agent's card
    ],
)
async def test_HATP_MCP_33_a_question_without_a_proven_requester_is_refused_and_nothing_is_asked(
    tmp_path: Path, clock: FakeClock, over: dict[str, Any], rule: str
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(server_of(gw)) as client:
            data = await refused(client, "ask_choose", choose(clock, **over))
            other = choose(clock)
            other["question"] = "Which flight?"  # the request is about another question
            about_other = await refused(client, "ask_choose", other)
    assert data["rule"] == rule and about_other["rule"] == "HATP-GW-48"
    assert gw.store.get("q-hotel") is None


async def test_HATP_GW_97_a_question_whose_decideBy_is_past_is_refused_with_the_time_in_words(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    past = "2026-11-29T09:45:00Z"  # a quarter of an hour before the gateway's clock
    q = QuestionRequest.model_validate(
        {"askId": "q-late", "kind": "text", "address": ROLE, "question": "Why?", "decideBy": past}
    )
    request = agent_request(question_digest(q), clock.now(), subject="question")
    args = {"ask_id": "q-late", "address": ROLE, "question": "Why?", "decide_by": past, "request": request}
    with anyio.fail_after(10):
        async with Client(server_of(gw)) as client:
            data = await refused(client, "ask_text", args)
    assert (data["rule"], data["path"]) == ("HATP-MCP-33", "$.decideBy")
    assert data["reason"] == "decideBy 2026-11-29 09:45 UTC (15 min ago) is already past"  # no wire timestamp
    assert gw.store.get("q-late") is None


async def test_HATP_MCP_33_another_question_under_a_known_ask_id_is_refused(tmp_path: Path, clock: FakeClock) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(server_of(gw)) as client:
            await tool(client, "ask_choose", choose(clock))
            data = await refused(client, "ask_choose", choose(clock, address=h("carol")) | {"ask_id": "q-hotel"})
            unknown = await refused(client, "question_status", {"ask_id": "q-none"})
    assert (data["rule"], data["code"]) == ("HATP-MCP-33", "ASK_MISMATCH")
    stored = gw.store.get("q-hotel")
    assert stored is not None and stored.record is not None and stored.record.ask.address == ROLE  # unchanged
    assert (unknown["rule"], unknown["code"]) == ("HATP-MCP-33", "NO_SUCH_ASK")


async def test_HATP_MCP_33_the_methods_ask_and_answer_the_same_over_json_rpc(tmp_path: Path, clock: FakeClock) -> None:
    gw = make_gateway(tmp_path, clock)
    q = QuestionRequest.model_validate(
        {"askId": "q-diet", "kind": "text", "address": h("alice"), "question": "Any dietary needs?", "maxLength": 200}
    )
    params = q.wire() | {"request": agent_request(question_digest(q), clock.now(), subject="question")}
    with anyio.fail_after(10):
        async with Client(server_of(gw)) as client:
            asked = await call_raw(client, "hatp/ask/text", params, 5)
            with pytest.raises(HatpError) as wrong_kind:
                await call_raw(client, "hatp/ask/choose", params, 5)
            await answer(client, "q-diet", "alice", "answer", clock, "vegetarian")
            done = await call_raw(client, "hatp/ask/status", {"askId": "q-diet"}, 5)
    assert asked["waitingFor"] == [h("alice")]
    assert wrong_kind.value.rule == "HATP-MCP-33" and "hatp/ask/choose asks a choose question" in str(wrong_kind.value)
    assert done["answer"]["value"] == "vegetarian" and json.dumps(done).count("signature") >= 1


def text_question(clock: FakeClock, ask_id: str) -> dict[str, Any]:
    """The ask_text arguments under `ask_id`, with the travel-bot's signed request about exactly this question."""
    body = {"askId": ask_id, "kind": "text", "address": h("alice"), "question": "Any dietary needs?"}
    request = agent_request(question_digest(QuestionRequest.model_validate(body)), clock.now(), subject="question")
    return {"ask_id": ask_id, "address": h("alice"), "question": "Any dietary needs?", "request": request}


@pytest.mark.parametrize(
    "squat",
    [
        SQUAT,  # where the transaction's approval of requirement `finance` is routed
        "toolcall.0123456789abcdef01234567",  # where a tool call's approval is routed
    ],
)
async def test_HATP_ASK_7_a_question_cannot_take_an_approvals_ask_id(
    tmp_path: Path, clock: FakeClock, squat: str
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        async with Client(server_of(gw)) as client:
            data = await refused(client, "ask_text", text_question(clock, squat))
        nothing = gw.store.get(squat)
        answer = await gw.ask(plan(), "finance")  # the coordinator prepares at the gateway later
    assert (data["rule"], data["code"]) == ("HATP-ASK-7", "ASK_ID_RESERVED")
    assert nothing is None
    assert answer.vote["decision"] == "pending" and answer.vote["txnId"] == "txn-acme-0001"


async def test_HATP_ASK_7_an_ask_under_an_approvals_id_that_holds_no_vote_is_refused_not_trusted(
    tmp_path: Path, clock: FakeClock
) -> None:
    gw = make_gateway(tmp_path, clock)
    with anyio.fail_after(10):
        # a store written before the namespaces were kept apart: a question already stands under the approval's id
        asked = await gw.open_question(ask_id="q-diet", kind="text", address=h("alice"), question="Any needs?")
        assert asked.record is not None
        rec = asked.record.model_copy(update={"ask": asked.record.ask.model_copy(update={"ask_id": SQUAT})})
        gw.store.create(StoredAsk(SQUAT, rec.state, rec, None, None), None, None)
        with pytest.raises(HatpError) as e:
            await gw.ask(plan(), "finance")
    assert (e.value.rule, e.value.code) == ("HATP-ASK-7", "ASK_ID_RESERVED")

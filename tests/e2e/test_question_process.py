"""Questions over MCP between real processes (HATP-MCP-33): an agent asks a person through the gateway server
(servers/gateway.py over streamable HTTP), the person answers through the gateway's tools with their own signed
decision, and the agent fetches the gateway's signed Answer; an answer that does not fit is never signed, and
the question survives a restart of the gateway."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from demo.people import GatewayRefused, decide_as
from hatp_mcp.core.model.question import QuestionRequest, question_digest
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.mcp.launch import launch_http
from tests.acme_org import ORG_DIR, agent_request, h, keyring

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def ask_text_args(ask_id: str, max_length: int) -> dict[str, Any]:
    q = QuestionRequest.model_validate(
        {"askId": ask_id, "kind": "text", "address": h("alice"), "question": "Dietary needs?", "maxLength": max_length}
    )
    request = agent_request(question_digest(q), datetime.now(UTC), subject="question")
    return {"ask_id": ask_id, "address": h("alice"), "question": "Dietary needs?", "max_length": max_length} | {
        "request": request
    }


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)  # type: ignore[no-any-return]


async def test_HATP_MCP_33_a_question_is_asked_answered_and_its_signed_answer_fetched_across_processes(
    tmp_path: Path,
) -> None:
    extra = ["--org", str(ORG_DIR)]
    with anyio.fail_after(60):
        async with launch_http("servers.gateway", tmp_path, extra=extra) as first, Client(first.url) as agent:
            asked = structured(await agent.call_tool("ask_text", ask_text_args("q-diet-1", 12)))
            with pytest.raises(GatewayRefused) as too_long:
                await decide_as(agent, "q-diet-1", "alice", "answer", value="no restrictions at all, thanks")
            pending = structured(await agent.call_tool("question_status", {"ask_id": "q-diet-1"}))
        async with launch_http("servers.gateway", tmp_path, extra=extra) as second, Client(second.url) as agent:
            await decide_as(agent, "q-diet-1", "alice", "answer", value="vegetarian")
            done = structured(await agent.call_tool("question_status", {"ask_id": "q-diet-1"}))
    assert asked["waitingFor"] == [h("alice")] and asked["ask"]["requester"] == h("dana")
    assert too_long.value.refusal["rule"] == "HATP-ASK-4"
    assert pending["state"] == "pending" and "answer" not in pending
    answer = done["answer"]
    assert (done["state"], answer["value"], answer["answerer"]) == ("answered", "vegetarian", h("alice"))
    verify_raw(answer, keyring(), role="gateway")


async def test_HATP_ASK_7_a_question_under_an_approvals_ask_id_is_refused_by_a_real_gateway(tmp_path: Path) -> None:
    squats = [f"txn-trip-{datetime.now(UTC):%Y%m%d%H%M%S}/finance", "toolcall.0123456789abcdef01234567"]
    with anyio.fail_after(60):
        async with (
            launch_http("servers.gateway", tmp_path, extra=["--org", str(ORG_DIR)]) as gateway,
            Client(gateway.url) as agent,
        ):
            refused = [await agent.call_tool("ask_text", ask_text_args(ask_id, 50)) for ask_id in squats]
            unknown = [await agent.call_tool("question_status", {"ask_id": ask_id}) for ask_id in squats]
    for result in refused:
        assert result.is_error and "HATP-ASK-7" in result.content[0].text  # type: ignore[union-attr]
    for result in unknown:  # nothing was stored under the approval's id
        assert result.is_error and "NO_SUCH_ASK" in result.content[0].text  # type: ignore[union-attr]

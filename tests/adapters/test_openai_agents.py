"""A real OpenAI Agents SDK run (Runner.run with a scripted Model, offline, tracing off) calls journaled function
tools: it marks item 882 returned, refunds it, the label tool fails, and the journal undoes both."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from hatp_mcp.adapters.openai_agents import journaled_tools
from hatp_mcp.core.journal.events import SagaStatus, StepState
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.driver import Journal, SagaRolledBack
from hatp_mcp.store.journal_store import MemoryJournalStore
from tests.adapters.test_pydantic_ai import PLAN, shop_tools
from tests.journal_shop import Shop
from tests.runtime.journal.test_driver import KEY


class Scripted(Model):
    """The 'model': one tool call per turn, in PLAN's order, then a final message."""

    def __init__(self) -> None:
        self.turn = 0

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        assert {t.name for t in tools} == {"mark_returned", "refund", "label"}
        i, self.turn = self.turn, self.turn + 1
        if i < len(PLAN):
            name, args_ = PLAN[i]
            out: list[Any] = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=f"call-{i}",
                    name=name,
                    arguments=json.dumps(args_),
                    id=f"fc-{i}",
                    status="completed",
                )
            ]
        else:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            out = [
                ResponseOutputMessage(id="msg", type="message", role="assistant", status="completed", content=[text])
            ]
        return ModelResponse(output=out, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the test runs without streaming")


def agent(journal: Journal, shop: Shop) -> Agent[Any]:
    return Agent(name="returns", model=Scripted(), tools=list(journaled_tools(journal, shop_tools(shop))))


@pytest.mark.anyio
async def test_an_openai_agents_run_whose_tool_fails_has_its_earlier_steps_undone(clock: FakeClock) -> None:
    shop = Shop()
    journal = Journal(MemoryJournalStore(), KEY, tools=shop_tools(shop), clock=clock)
    with pytest.raises(SagaRolledBack) as err:
        async with journal.saga("return-882") as saga:
            await Runner.run(agent(journal, shop), "Return item 882", run_config=RunConfig(tracing_disabled=True))
    cause: BaseException | None = err.value.cause
    while cause is not None and str(cause) != "label service down":  # the SDK may wrap the tool's error
        cause = cause.__cause__
    assert cause is not None
    assert [(s.tool, s.state) for s in err.value.steps] == [
        ("mark_returned", StepState.ROLLED_BACK),
        ("refund", StepState.ROLLED_BACK),
        ("label", StepState.FAILED),
    ]
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"] and saga.status is SagaStatus.ROLLED_BACK


@pytest.mark.anyio
async def test_an_openai_agents_run_whose_tools_succeed_completes_the_saga(clock: FakeClock) -> None:
    shop = Shop()
    shop.label_fails = False
    journal = Journal(MemoryJournalStore(), KEY, tools=shop_tools(shop), clock=clock)
    async with journal.saga("return-882") as saga:
        result = await Runner.run(agent(journal, shop), "Return item 882", run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "done" and saga.status is SagaStatus.COMPLETED
    assert shop.kinds() == ["mark", "refund", "label"]

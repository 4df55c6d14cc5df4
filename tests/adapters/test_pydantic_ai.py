"""A real PydanticAI agent loop (its FunctionModel standing in for the LLM, offline) calls journaled tools: it
marks item 882 returned, refunds it, the label tool fails, and the journal undoes the refund and the return."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from hatp_mcp.adapters.pydantic_ai import journaled_tools
from hatp_mcp.core.journal.events import SagaStatus, StepState
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.driver import Journal, SagaRolledBack
from hatp_mcp.runtime.journal.undoable import undoable
from hatp_mcp.store.journal_store import MemoryJournalStore
from tests.journal_shop import Shop
from tests.runtime.journal.test_driver import KEY

PLAN = [("mark_returned", {"item": "882"}), ("refund", {"item": "882", "usd": "40.00"}), ("label", {"item": "882"})]


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The 'model': one tool call per turn, in PLAN's order, then a final answer."""
    returned = sum(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", []))
    assert {t.name for t in info.function_tools} == {"mark_returned", "refund", "label"}
    if returned < len(PLAN):
        name, args = PLAN[returned]
        return ModelResponse(parts=[ToolCallPart(tool_name=name, args=args, tool_call_id=f"call-{returned}")])
    return ModelResponse(parts=[TextPart(content="done")])


def shop_tools(shop: Shop) -> list[Any]:
    schema = {"type": "object", "properties": {"item": {"type": "string"}, "usd": {"type": "string"}}}
    t = shop.tools()
    return [
        undoable("mark_returned", shop.mark_returned, shop.unmark, shop.lookup_mark, schema=schema),
        undoable("refund", t["refund"].execute, t["refund"].undo, t["refund"].lookup, schema=schema),
        undoable("label", shop.label, lookup=shop.lookup_label, description="print a return label", schema=schema),
    ]


@pytest.mark.anyio
async def test_a_pydantic_ai_agent_whose_tool_fails_has_its_earlier_steps_undone(clock: FakeClock) -> None:
    shop = Shop()
    tools = shop_tools(shop)
    journal = Journal(MemoryJournalStore(), KEY, tools=tools, clock=clock)
    agent = Agent(FunctionModel(scripted), tools=journaled_tools(journal, tools))
    with pytest.raises(SagaRolledBack) as err:
        async with journal.saga("return-882", "saga-ai") as saga:
            await agent.run("Return item 882 and refund the customer $40")
    assert str(err.value.cause) == "label service down"
    assert [(s.tool, s.state) for s in err.value.steps] == [
        ("mark_returned", StepState.ROLLED_BACK),
        ("refund", StepState.ROLLED_BACK),
        ("label", StepState.FAILED),
    ]
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"] and saga.status is SagaStatus.ROLLED_BACK


@pytest.mark.anyio
async def test_a_pydantic_ai_agent_whose_tools_succeed_completes_the_saga(clock: FakeClock) -> None:
    shop = Shop()
    shop.label_fails = False
    tools = shop_tools(shop)
    journal = Journal(MemoryJournalStore(), KEY, tools=tools, clock=clock)
    agent = Agent(FunctionModel(scripted), tools=journaled_tools(journal, tools))
    async with journal.saga("return-882") as saga:
        result = await agent.run("Return item 882")
    assert result.output == "done" and saga.status is SagaStatus.COMPLETED
    assert shop.kinds() == ["mark", "refund", "label"]

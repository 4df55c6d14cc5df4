"""A real LangGraph agent loop (a StateGraph of a model node and LangGraph's ToolNode, looping on tools_condition,
with langchain-core's fake chat model, offline) calls journaled LangChain tools: it marks item 882 returned,
refunds it, the label tool fails, and the journal undoes both."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from hatp_mcp.adapters.langchain import journaled_tools
from hatp_mcp.core.journal.events import SagaStatus, StepState
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.driver import Journal, SagaRolledBack
from hatp_mcp.store.journal_store import MemoryJournalStore
from tests.adapters.test_pydantic_ai import PLAN, shop_tools
from tests.journal_shop import Shop
from tests.runtime.journal.test_driver import KEY


class ToolCallingFake(GenericFakeChatModel):
    """langchain-core's fake chat model, answering in turn with PLAN's tool calls, then a final message."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFake:
        assert {t.name for t in tools} == {"mark_returned", "refund", "label"}
        return self


def model() -> ToolCallingFake:
    turns = [
        AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{i}", "type": "tool_call"}])
        for i, (name, args) in enumerate(PLAN)
    ]
    return ToolCallingFake(messages=iter([*turns, AIMessage(content="done")]))


def create_agent(llm: ToolCallingFake, tools: list[Any]) -> Any:
    """The ReAct loop: the model answers; while it asks for tools, the ToolNode runs them and the model goes on."""
    bound = llm.bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile()


@pytest.mark.anyio
async def test_a_langgraph_agent_whose_tool_fails_has_its_earlier_steps_undone(clock: FakeClock) -> None:
    shop = Shop()
    tools = shop_tools(shop)
    journal = Journal(MemoryJournalStore(), KEY, tools=tools, clock=clock)
    agent = create_agent(model(), journaled_tools(journal, tools))
    with pytest.raises(SagaRolledBack) as err:
        async with journal.saga("return-882") as saga:
            await agent.ainvoke({"messages": [("user", "Return item 882 and refund the customer $40")]})
    assert str(err.value.cause) == "label service down"
    assert [(s.tool, s.state) for s in err.value.steps] == [
        ("mark_returned", StepState.ROLLED_BACK),
        ("refund", StepState.ROLLED_BACK),
        ("label", StepState.FAILED),
    ]
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"] and saga.status is SagaStatus.ROLLED_BACK


@pytest.mark.anyio
async def test_a_langgraph_agent_whose_tools_succeed_completes_the_saga(clock: FakeClock) -> None:
    shop = Shop()
    shop.label_fails = False
    tools = shop_tools(shop)
    journal = Journal(MemoryJournalStore(), KEY, tools=tools, clock=clock)
    agent = create_agent(model(), journaled_tools(journal, tools))
    async with journal.saga("return-882") as saga:
        state = await agent.ainvoke({"messages": [("user", "Return item 882")]})
    assert state["messages"][-1].content == "done" and saga.status is SagaStatus.COMPLETED
    assert shop.kinds() == ["mark", "refund", "label"]

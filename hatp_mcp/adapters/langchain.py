"""The journal for LangChain and LangGraph agents: `journaled_tools(journal, tools)` gives LangChain tools whose
every call is a step of the enclosing saga (`pip install hatp-mcp[langgraph]`).

    tools = journaled_tools(journal, [mark_returned, refund, label])   # for ToolNode(tools), model.bind_tools(tools)
    async with journal.saga("return-882"):
        await graph.ainvoke({"messages": [("user", "Return item 882")]})   # a failing tool rolls the saga back

A tool that raises ends the graph run with that error (LangGraph's ToolNode re-raises execution errors by
default), which leaves the saga block: the journal undoes the completed steps, last first, and raises
SagaRolledBack (or SagaRollbackFailed) from it. Tools are async only (the journal is).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.tools import StructuredTool

from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.runtime.journal.undoable import Undoable

__all__ = ["journaled_tools"]

_ANY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def journaled_tools(journal: Journal, tools: Iterable[Undoable]) -> list[StructuredTool]:
    """LangChain tools for `tools`, each call journaled in the current saga (a call outside one raises
    RuntimeError). Each tool's `schema` is its arguments' JSON Schema (any object when it declares none)."""
    listed = list(tools)
    wrapped = journal.wrap(listed)
    return [
        StructuredTool.from_function(
            coroutine=wrapped[t.name],
            name=t.name,
            description=t.description or t.name,
            args_schema=t.schema or _ANY_OBJECT,
        )
        for t in listed
    ]

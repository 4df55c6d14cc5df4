"""The journal for PydanticAI agents: `journaled_tools(journal, tools)` gives PydanticAI tools whose every call is a
step of the enclosing saga (`pip install hatp-mcp[pydantic-ai]`).

    agent = Agent(model, tools=journaled_tools(journal, [mark_returned, refund, label]))
    async with journal.saga("return-882"):
        await agent.run("Return item 882 and refund the customer")   # a failing tool rolls the saga back

A tool that raises ends the agent run with that error, which leaves the saga block: the journal undoes the steps
that completed, last first, and raises SagaRolledBack (or SagaRollbackFailed) from it. The tools are sequential
(one call at a time), so the order the journal undoes in is the order the agent acted in.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_ai import Tool

from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.runtime.journal.undoable import Undoable

__all__ = ["journaled_tools"]

_ANY_OBJECT: dict[str, Any] = {"type": "object", "additionalProperties": True}


def journaled_tools(journal: Journal, tools: Iterable[Undoable]) -> list[Tool[Any]]:
    """PydanticAI tools for `tools`, each call journaled in the current saga (a call outside one raises
    RuntimeError). Each tool's `schema` becomes the arguments' JSON Schema (any object when it declares none)."""
    listed = list(tools)
    wrapped = journal.wrap(listed)
    return [
        Tool.from_schema(
            wrapped[t.name],
            name=t.name,
            description=t.description or t.name,
            json_schema=t.schema or _ANY_OBJECT,
            sequential=True,
        )
        for t in listed
    ]

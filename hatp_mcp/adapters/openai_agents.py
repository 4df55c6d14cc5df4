"""The journal for OpenAI Agents SDK agents: `journaled_tools(journal, tools)` gives function tools whose every call
is a step of the enclosing saga (`pip install hatp-mcp[openai-agents]`).

    agent = Agent(name="returns", tools=journaled_tools(journal, [mark_returned, refund, label]))
    async with journal.saga("return-882"):
        await Runner.run(agent, "Return item 882")   # a failing tool rolls the saga back

A tool that raises ends the run (the SDK raises its UserError, whose __cause__ is the tool's error; a plain
FunctionTool has no failure_error_function turning it into a message for the model), which leaves the saga block:
the journal undoes the completed steps, last first, and raises SagaRolledBack (or SagaRollbackFailed) from it.
A tool's result goes to the model as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agents import FunctionTool, RunContextWrapper

from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.runtime.journal.undoable import Undoable

__all__ = ["journaled_tools"]

_ANY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": True}


def _invoker(call: Callable[..., Awaitable[Any]]) -> Callable[[RunContextWrapper[Any], str], Awaitable[str]]:
    async def invoke(ctx: RunContextWrapper[Any], raw: str) -> str:
        args = json.loads(raw) if raw else {}
        if not isinstance(args, dict):
            raise ValueError(f"tool arguments are a JSON object, not {raw!r}")
        return json.dumps(await call(**args))

    return invoke


def journaled_tools(journal: Journal, tools: Iterable[Undoable]) -> list[FunctionTool]:
    """Function tools for `tools`, each call journaled in the current saga (a call outside one raises
    RuntimeError). Each tool's `schema` is its arguments' JSON Schema (any object when it declares none)."""
    listed = list(tools)
    wrapped = journal.wrap(listed)
    return [
        FunctionTool(
            name=t.name,
            description=t.description or t.name,
            params_json_schema=t.schema or _ANY_OBJECT,
            on_invoke_tool=_invoker(wrapped[t.name]),
            strict_json_schema=False,
        )
        for t in listed
    ]

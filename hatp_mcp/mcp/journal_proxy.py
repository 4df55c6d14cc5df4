"""A journaling proxy: an upstream MCP server's tools, re-exposed unchanged, each call journaled as a saga step
with the undo the operator's undo map declares (HATP-JRN-14, hatp_mcp/core/journal/undo_map.py).

Every proxied call is registered (durable) before it goes upstream, with its idempotency key in `_meta`
(`io.hatp/idempotencyKey`), and its result is written after; the upstream's answer goes back to the client
exactly as it came. A call outside a saga begins one. The proxy adds `saga_begin`, `saga_complete`,
`saga_rollback` and `saga_status`; a rollback calls the upstream undo tools, last first, with arguments taken by
JSON pointer from each call's arguments and result. Refusals leave through hatp_mcp.mcp.errors only.
"""

from __future__ import annotations

import json
from typing import Any, cast

import mcp.types as types
from mcp import Client
from mcp.server import Server
from mcp.types import RequestParamsMeta

from hatp_mcp.core.journal.events import SagaStatus
from hatp_mcp.core.journal.undo_map import UndoMap, UndoRule
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import to_mcp_error
from hatp_mcp.mcp.journal_server import KEY_META
from hatp_mcp.runtime.journal.driver import Journal, Saga
from hatp_mcp.runtime.journal.undoable import Undoable, UndoRefused, undoable

__all__ = ["SAGA_TOOLS", "JournalingProxy"]

SAGA_TOOLS: list[types.Tool] = [
    types.Tool(
        name="saga_begin",
        description="Begin a saga: the calls that follow are its steps, undone last first if it is rolled back.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    ),
    types.Tool(
        name="saga_complete",
        description="End the current saga: every step stands.",
        input_schema={"type": "object", "properties": {}},
    ),
    types.Tool(
        name="saga_rollback",
        description="Undo the current saga's calls, last first, through the upstream's undo tools.",
        input_schema={"type": "object", "properties": {"reason": {"type": "string"}}},
    ),
    types.Tool(
        name="saga_status",
        description="The current (or a named) saga's status and steps.",
        input_schema={"type": "object", "properties": {"saga_id": {"type": "string"}}},
    ),
]


def _text(result: types.CallToolResult) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def _json_result(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(value))], structured_content=value
    )


class JournalingProxy:
    """The proxy's tool handlers over one upstream client. Build, then `server()` for the low-level server."""

    def __init__(self, upstream: Client, upstream_tools: list[types.Tool], journal: Journal, undo_map: UndoMap):
        names = {t.name for t in upstream_tools}
        clash = names & {t.name for t in SAGA_TOOLS}
        if clash:
            raise ValueError(f"the upstream already has tools named {sorted(clash)}: the proxy cannot add its own")
        self.upstream = upstream
        self.upstream_tools = upstream_tools
        self.journal = journal
        self.map = undo_map
        self.current: Saga | None = None
        for t in upstream_tools:
            journal.register(self._undoable(undo_map.rule(t.name)))

    def _undoable(self, rule: UndoRule) -> Undoable:
        async def never(args: dict[str, Any], key: str) -> Any:
            raise UndoRefused("the proxy makes proxied calls itself")

        if rule.undo is None:
            return undoable(rule.tool, never, pivot=rule.pivot)
        undo_tool = rule.undo

        async def undo(args: dict[str, Any], output: Any, key: str) -> Any:
            try:
                call_args = rule.build(args, output)
            except HatpError as exc:
                raise UndoRefused(exc.one_line()) from exc
            result = await self.upstream.call_tool(undo_tool, call_args, meta=cast(RequestParamsMeta, {KEY_META: key}))
            if result.is_error:
                raise RuntimeError(f"{undo_tool} failed: {_text(result) or 'isError'}")
            return result.structured_content

        return undoable(rule.tool, never, undo)

    def server(self, name: str = "hatp-journal-proxy") -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[*self.upstream_tools, *SAGA_TOOLS])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            args = dict(params.arguments or {})
            try:
                if params.name in {t.name for t in SAGA_TOOLS}:
                    return _json_result(await self._saga_tool(params.name, args))
                return await self._proxied(params.name, args)
            except HatpError as exc:
                raise to_mcp_error(exc) from exc

        return Server(name, version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def _saga(self) -> Saga:
        if self.current is None or self.current.status is not SagaStatus.IN_PROGRESS:
            self.current = await self.journal.begin("proxy")
        return self.current

    async def _proxied(self, tool: str, args: dict[str, Any]) -> types.CallToolResult:
        saga = await self._saga()
        step = await saga.add_step(tool, args)  # durable before the call goes upstream (HATP-JRN-2)
        try:
            result = await self.upstream.call_tool(tool, args, meta=cast(RequestParamsMeta, {KEY_META: step.key}))
        except Exception as exc:  # no answer: the step stays pending, in doubt (HATP-JRN-6)
            text = f"the upstream did not answer ({exc!r}); the call is in doubt and journaled as such"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        if result.is_error:
            await saga.fail_step(step.step_id, _text(result) or "isError")
        else:
            output = result.structured_content
            await saga.complete_step(step.step_id, output if output is not None else {"text": _text(result)})
        return result

    async def _saga_tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "saga_begin":
            if self.current is not None and self.current.status is SagaStatus.IN_PROGRESS:
                raise HatpError(
                    "HATP-JRN-1",
                    f"saga {self.current.id} is still in progress",
                    code="SAGA_IN_PROGRESS",
                    fix="end it first: saga_complete or saga_rollback",
                )
            self.current = await self.journal.begin(str(args.get("name") or "proxy"))
            return self._status(self.current)
        if name == "saga_status":
            sid = args.get("saga_id")
            saga = await self.journal.get(sid) if isinstance(sid, str) else self.current
            if saga is None:
                raise HatpError("HATP-JRN-1", "no saga has begun on this proxy", code="NO_SAGA")
            return self._status(saga)
        if self.current is None:
            raise HatpError("HATP-JRN-1", "no saga has begun on this proxy", code="NO_SAGA")
        if name == "saga_complete":
            await self.current.complete()
        else:
            await self.current.rollback(str(args.get("reason") or "rolled back by the agent"))
        return self._status(self.current)

    @staticmethod
    def _status(saga: Saga) -> dict[str, Any]:
        return {
            "sagaId": saga.id,
            "status": saga.status.value,
            "steps": [
                {"stepId": s.step_id, "tool": s.tool, "state": s.state.value, "rollback": s.rollback}
                for s in saga.steps
            ],
        }

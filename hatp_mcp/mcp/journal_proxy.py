"""The proxy: an upstream MCP server's tools, each handled by the policy file's rule for it (spec/proxy.md):
passed, journaled as a saga step with the undo the file declares, journaled as an irreversible step, hidden or
denied. The journal's rules hold for every journaled call (HATP-JRN-14).

Every journaled call is registered (durable) before it goes upstream, with its idempotency key in `_meta`
(`io.hatp/idempotencyKey`), and its result is written after; the upstream's answer goes back to the client as it
came (an irreversible tool's with a line saying it cannot be undone). A journaled call outside a saga begins one.
The proxy adds `saga_begin`, `saga_complete`, `saga_rollback` and `saga_status`; a rollback calls the upstream
undo tools, last first, with arguments built by the file's JMESPath expressions from each call's arguments and
result. Refusals leave through hatp_mcp.mcp.errors only.
"""

from __future__ import annotations

import json
from typing import Any, cast

import mcp.types as types
from mcp import Client
from mcp.server import Server
from mcp.types import RequestParamsMeta

from hatp_mcp.core.journal.events import SagaStatus
from hatp_mcp.core.journal.proxy_tools import (
    IRREVERSIBLE_NOTE,
    ToolRule,
    UpstreamTool,
    build_arguments,
    call_document,
    resolve_tools,
)
from hatp_mcp.core.model.proxy_policy import LookupCall, ProxyPolicy, UndoCall, compiled
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import to_mcp_error, tool_refusal
from hatp_mcp.mcp.journal_server import KEY_META
from hatp_mcp.mcp.proxy_gate import GATE_NOTE, ProxyGate, gated, progress_reporter
from hatp_mcp.runtime.journal.driver import Journal, Saga
from hatp_mcp.runtime.journal.undoable import (
    DidNotHappen,
    Happened,
    LookupFn,
    Undo,
    Undoable,
    UndoRefused,
    undoable,
)

__all__ = ["SAGA_TOOLS", "JournalingProxy", "proxy_names_free", "result_document", "upstream_tools"]

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
        description="Undo the current saga's calls, last first, through the upstream's undo tools. Calls that "
        "cannot be undone stay as they are, and the result lists them (leftInPlace).",
        input_schema={"type": "object", "properties": {"reason": {"type": "string"}}},
    ),
    types.Tool(
        name="saga_status",
        description="The current (or a named) saga's status and steps.",
        input_schema={"type": "object", "properties": {"saga_id": {"type": "string"}}},
    ),
]
_SAGA_NAMES = frozenset(t.name for t in SAGA_TOOLS)


def proxy_names_free(tools: list[types.Tool]) -> None:
    """Raises ValueError when the upstream already has a tool named as one of the saga tools."""
    clash = {t.name for t in tools} & _SAGA_NAMES
    if clash:
        raise ValueError(f"the upstream already has tools named {sorted(clash)}: the proxy cannot add its own")


def upstream_tools(tools: list[types.Tool]) -> list[UpstreamTool]:
    """What the policy checks need of the upstream's tools/list."""
    return [
        UpstreamTool(t.name, t.input_schema, bool(t.annotations is not None and t.annotations.read_only_hint))
        for t in tools
    ]


def _text(result: types.CallToolResult) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def result_document(result: types.CallToolResult) -> Any:
    """What expressions see as `result`: the structured result, else the text parsed as JSON, else the text."""
    if result.structured_content is not None:
        return result.structured_content
    text = _text(result)
    try:
        return json.loads(text)
    except ValueError:
        return text


def _json_result(value: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(value))], structured_content=value
    )


class JournalingProxy:
    """The proxy's tool handlers over one upstream client. Build, then `server()` for the low-level server.

    Raises HatpError HATP-PXY-4/5/6 when the policy does not fit the upstream's tools (nothing is registered),
    ValueError when the upstream already has a tool named as one of the saga tools."""

    def __init__(
        self,
        upstream: Client,
        tools: list[types.Tool],
        journal: Journal,
        policy: ProxyPolicy,
        gate: ProxyGate | None = None,
    ):
        proxy_names_free(tools)
        self.rules: dict[str, ToolRule] = resolve_tools(policy, upstream_tools(tools))
        self.upstream = upstream
        self.journal = journal
        self.gate = gate
        self.current: Saga | None = None
        self.listed: list[types.Tool] = []
        for t in tools:
            rule = self.rules[t.name]
            if rule.action == "hide":
                continue
            if rule.action == "irreversible":
                t = t.model_copy(update={"description": f"{t.description or t.name}\n\n{IRREVERSIBLE_NOTE}"})
            if rule.action == "gate":  # HATP-PXY-20..24: hatp_mcp/mcp/proxy_gate.py
                t = t.model_copy(update={"description": f"{t.description or t.name}\n\n{GATE_NOTE}"})
                assert rule.gate is not None  # policy gate has a gate (HATP-PXY-20, when the file is read)
                gated(self.gate, rule).add(
                    t.name, rule.gate, t.model_dump(mode="json", by_alias=True, exclude_none=True)
                )
            self.listed.append(t)
            if rule.action in ("journal", "irreversible"):
                journal.register(self._undoable(rule))

    def _undoable(self, rule: ToolRule) -> Undoable:
        async def never(args: dict[str, Any], key: str) -> Any:
            raise UndoRefused("the proxy makes proxied calls itself")

        lookup = self._lookup(rule.tool, rule.lookup) if rule.lookup is not None else None
        if rule.undo is None:
            return undoable(rule.tool, never, lookup=lookup, irreversible=True)
        return undoable(rule.tool, never, self._undo(rule.tool, rule.undo), lookup)

    def _undo(self, tool: str, call: UndoCall) -> Undo:
        async def undo(args: dict[str, Any], output: Any, key: str) -> Any:
            try:
                built = build_arguments(
                    call.arguments,
                    call_document(args, output),
                    what=f"the undo of {tool}",
                    path=f"tools.{tool}.undo.arguments",
                )
            except HatpError as exc:  # never sent with an argument missing (HATP-PXY-7): a dead letter says why
                raise UndoRefused(exc.one_line()) from exc
            result = await self.upstream.call_tool(call.tool, built, meta=cast(RequestParamsMeta, {KEY_META: key}))
            if result.is_error:
                raise RuntimeError(f"{call.tool} failed: {_text(result) or 'isError'}")
            return result_document(result)

        return undo

    def _lookup(self, tool: str, call: LookupCall) -> LookupFn:
        async def lookup(args: dict[str, Any], key: str) -> Happened | DidNotHappen | None:
            built = build_arguments(
                call.arguments, {"args": args}, what=f"the lookup of {tool}", path=f"tools.{tool}.lookup.arguments"
            )
            result = await self.upstream.call_tool(call.tool, built, meta=cast(RequestParamsMeta, {KEY_META: key}))
            if result.is_error:
                return None
            happened = compiled(call.happened).search(call_document(args, result_document(result)))
            if happened is None:
                return None
            return Happened(None) if happened else DidNotHappen()

        return lookup

    def server(self, name: str = "hatp-journal-proxy") -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[*self.listed, *SAGA_TOOLS])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            args = dict(params.arguments or {})
            try:
                if params.name in _SAGA_NAMES:
                    return _json_result(await self._saga_tool(params.name, args))
            except HatpError as exc:
                raise to_mcp_error(exc) from exc
            rule = self.rules.get(params.name)
            if rule is None or rule.action == "hide":  # a hidden tool is refused as one that does not exist
                return tool_refusal(
                    HatpError(
                        "HATP-PXY-7",
                        f"there is no tool named {params.name!r} here",
                        path="name",
                        code="UNKNOWN_TOOL",
                        fix="call one of the tools tools/list gives",
                    )
                )
            if rule.action == "deny":
                return tool_refusal(
                    HatpError(
                        "HATP-PXY-7",
                        f"the proxy's policy denies {params.name!r}: the call was not sent",
                        path="name",
                        code="TOOL_DENIED",
                        fix="do without it, or ask the operator to change its policy (spec/proxy.md)",
                    )
                )
            if rule.action == "pass":
                return await self.upstream.call_tool(params.name, args)
            if rule.action == "gate" and self.gate is not None:
                return await self._gated(ctx, params, args)
            try:
                result = await self._journaled(params.name, args)
            except HatpError as exc:
                raise to_mcp_error(exc) from exc
            if rule.action == "irreversible":  # every result says so (HATP-PXY-8)
                note = types.TextContent(type="text", text=IRREVERSIBLE_NOTE)
                result = result.model_copy(update={"content": [*result.content, note]})
            return result

        return Server(name, version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    async def _gated(self, ctx: Any, params: types.CallToolRequestParams, args: dict[str, Any]) -> types.CallToolResult:
        assert self.gate is not None
        tool = next(t for t in self.listed if t.name == params.name)
        meta: dict[str, Any] = dict(params.meta or {})

        async def upstream() -> types.CallToolResult:
            return await self.upstream.call_tool(params.name, args)

        return await self.gate.call(
            params.name,
            tool.model_dump(mode="json", by_alias=True, exclude_none=True),
            args,
            meta,
            upstream,
            progress_reporter(ctx, meta),
        )

    async def _saga(self) -> Saga:
        if self.current is None or self.current.status is not SagaStatus.IN_PROGRESS:
            self.current = await self.journal.begin("proxy")
        return self.current

    async def _journaled(self, tool: str, args: dict[str, Any]) -> types.CallToolResult:
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
            await saga.complete_step(step.step_id, result_document(result))
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
        """The saga's status and steps; `leftInPlace`: the irreversible steps a rollback left standing."""
        steps = []
        for s in saga.steps:
            step: dict[str, Any] = {"stepId": s.step_id, "tool": s.tool, "state": s.state.value, "rollback": s.rollback}
            if s.irreversible:
                step["irreversible"] = True
            if s.error is not None:
                step["error"] = s.error
            steps.append(step)
        out: dict[str, Any] = {"sagaId": saga.id, "status": saga.status.value, "steps": steps}
        left = [s.step_id for s in saga.steps if s.rollback == "kept-irreversible"]
        if left:
            out["leftInPlace"] = left
        return out

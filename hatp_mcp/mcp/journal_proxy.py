"""The proxy: an upstream MCP server's tools, each handled by the policy file's rule for it (spec/proxy.md):
passed, journaled as a saga step with the undo the file declares, journaled as an irreversible step, hidden or
denied. The journal's rules hold for every journaled call (HATP-JRN-14).

Every journaled call is registered (durable) before it goes upstream, with its idempotency key in `_meta`
(`io.hatp/idempotencyKey`), and its result is written after; the upstream's answer goes back to the client as it
came (an irreversible tool's with a line saying it cannot be undone). A journaled call outside a saga is a saga of
its own (`outside-saga`), completed once its answer is written: nothing rolls it back. The proxy adds
`saga_begin`, `saga_complete`, `saga_rollback` and `saga_status`; a rollback calls the upstream undo tools, last
first, with arguments built by the file's JMESPath expressions from each call's arguments and result.

A restart never undoes on its own (HATP-PXY-9): the journal recovers with policy `resume`, and `reopen` leaves every
saga the model began open, the last one current again, for the model (or the operator) to complete or roll back.
Every saga tool's refusal is an `isError` result (HATP-PXY-10). Refusals leave through hatp_mcp.mcp.errors only.
"""

from __future__ import annotations

import json
from typing import Any, cast

import mcp.types as types
from mcp import Client
from mcp.server import Server
from mcp.types import RequestParamsMeta

from hatp_mcp.core.journal.events import SagaStatus, StepState
from hatp_mcp.core.journal.proxy_tools import (
    IRREVERSIBLE_NOTE,
    ToolRule,
    UpstreamTool,
    build_arguments,
    call_document,
    resolve_tools,
)
from hatp_mcp.core.model.proxy_policy import LookupCall, ProxyPolicy, UndoCall, compiled
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.mcp.errors import tool_refusal
from hatp_mcp.mcp.journal_server import KEY_META
from hatp_mcp.mcp.proxy_elicit import url_elicitation
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

__all__ = [
    "LOCK",
    "OUTSIDE_SAGA",
    "RECOVERY_POLICY",
    "SAGA_TOOLS",
    "JournalingProxy",
    "proxy_names_free",
    "result_document",
    "saga_status",
    "upstream_tools",
]

# The journal's recovery policy on the proxy (HATP-PXY-9, HATP-JRN-10): a restart resolves in-doubt steps by lookup
# and leaves each saga in progress; it never rolls anything back on its own.
RECOVERY_POLICY = "resume"
# The name of the one-step saga that journals a call made outside any saga the model began (HATP-PXY-9).
OUTSIDE_SAGA = "outside-saga"
# The lock a proxy holds on its --data folder while it runs (HATP-PXY-13; hatp_mcp.store.data_lock).
LOCK = "proxy"
_SAGA_ID = {"saga_id": {"type": "string", "description": "another open saga than the current one"}}

SAGA_TOOLS: list[types.Tool] = [
    types.Tool(
        name="saga_begin",
        description="Begin a saga: the calls that follow are its steps, undone last first if it is rolled back.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    ),
    types.Tool(
        name="saga_complete",
        description="End the current saga (or the open saga named): every step stands.",
        input_schema={"type": "object", "properties": {**_SAGA_ID}},
    ),
    types.Tool(
        name="saga_rollback",
        description="Undo the current saga's calls (or the open saga named), last first, through the upstream's "
        "undo tools. Calls that cannot be undone stay as they are, and the result lists them (leftInPlace) and "
        "why each undo failed (deadLetters).",
        input_schema={"type": "object", "properties": {"reason": {"type": "string"}, **_SAGA_ID}},
    ),
    types.Tool(
        name="saga_status",
        description="The current (or a named) saga's status and steps, whether it was recovered after a restart, "
        "and the other sagas still open.",
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
        UpstreamTool(
            t.name,
            t.input_schema,
            bool(t.annotations is not None and t.annotations.read_only_hint),
            bool(t.annotations is not None and t.annotations.idempotent_hint),
        )
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
            if rule.action in ("hide", "participant"):  # a participant tool is reached by hatp/txn/* only
                continue
            if rule.action == "irreversible":
                t = t.model_copy(update={"description": f"{t.description or t.name}\n\n{IRREVERSIBLE_NOTE}"})
            if rule.action == "gate":  # HATP-PXY-20..24: hatp_mcp/mcp/proxy_gate.py
                t = t.model_copy(update={"description": f"{t.description or t.name}\n\n{GATE_NOTE}"})
                if rule.gate is None:  # the file's reading refused a policy gate without one (HATP-PXY-20)
                    raise BrokenInvariant(f"{t.name}: policy gate without a gate passed the policy file's checks")
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

    async def reopen(self) -> dict[str, SagaStatus]:
        """After `journal.recover()` (policy `resume`): what a restart does with the sagas left open (HATP-PXY-9).

        A saga the model began stays open, nothing of it undone, and the last of them is current again, so that
        `saga_status` shows it and `saga_complete` / `saga_rollback` end it. A call made outside any saga is never
        rolled back: its one-step saga is completed once its step is settled; a step still in doubt (no lookup,
        or one that cannot tell) keeps it open and listed. Returns each open saga's status after this."""
        out: dict[str, SagaStatus] = {}
        for sid in await self.journal.store.unfinished():
            try:
                saga = await self.journal.get(sid)
            except HatpError:  # its record does not verify: recover() alerted; it is left for a person
                continue
            if saga.status is not SagaStatus.IN_PROGRESS:
                out[sid] = saga.status
                continue
            if saga.name == OUTSIDE_SAGA:
                if not any(s.state in (StepState.PENDING, StepState.IN_DOUBT) for s in saga.steps):
                    await saga.complete()
            else:
                self.current = saga
            out[sid] = saga.status
        return out

    def server(self, name: str = "hatp-journal-proxy") -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=[*self.listed, *SAGA_TOOLS])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            args = dict(params.arguments or {})
            try:
                if params.name in _SAGA_NAMES:  # a refusal is the tool's result, never a JSON-RPC error (HATP-PXY-10)
                    return _json_result(await self._saga_tool(params.name, args))
            except HatpError as exc:
                return tool_refusal(exc)
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
            if rule.action == "participant":  # HATP-PXY-32: only a transaction's commit calls it
                return tool_refusal(
                    HatpError(
                        "HATP-PXY-32",
                        f"{params.name!r} is a transaction participant here: it runs only when a coordinator "
                        "commits a plan naming it, never on a direct call; the call was not sent",
                        path="name",
                        code="PARTICIPANT_ONLY",
                        fix="put it in a plan and begin the transaction through a HATP coordinator",
                    )
                )
            if rule.action == "deny":
                return tool_refusal(
                    HatpError(
                        "HATP-PXY-7",
                        f"the proxy's policy denies {params.name!r}: the call was not sent",
                        path="name",
                        code="TOOL_DENIED",
                        fix="do without it, or ask the operator to change the tool's policy in the proxy's policy file",
                    )
                )
            if rule.action == "pass":
                return await self.upstream.call_tool(params.name, args)
            if rule.action == "gate" and self.gate is not None:
                return await self._gated(ctx, params, args)
            try:
                result = await self._journaled(params.name, args)
            except HatpError as exc:
                return tool_refusal(exc)
            if rule.action == "irreversible":  # every result says so (HATP-PXY-8)
                note = types.TextContent(type="text", text=IRREVERSIBLE_NOTE)
                result = result.model_copy(update={"content": [*result.content, note]})
            return result

        return Server(name, version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)

    def _in_saga(self) -> bool:
        return self.current is not None and self.current.status is SagaStatus.IN_PROGRESS

    async def _gated(self, ctx: Any, params: types.CallToolRequestParams, args: dict[str, Any]) -> types.CallToolResult:
        if self.gate is None:
            raise BrokenInvariant(f"{params.name} is gated and the proxy has no gate")
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
            url_elicitation(ctx, progress_reporter(ctx, meta)),
        )

    async def _journaled(self, tool: str, args: dict[str, Any]) -> types.CallToolResult:
        """One journaled call: a step of the current saga, or (outside any) of a saga of its own, completed once
        its answer is written (HATP-PXY-9): no rollback of the model's reaches it."""
        outside = not self._in_saga()
        saga = await self.journal.begin(OUTSIDE_SAGA) if outside else self.current
        if saga is None:
            raise BrokenInvariant("a call inside a saga found no current saga")
        try:
            step = await saga.add_step(tool, args)  # durable before the call goes upstream (HATP-JRN-2)
        except HatpError:
            if outside:  # (refused before anything went out: its saga of its own holds nothing)
                await saga.complete()
            raise
        try:
            result = await self.upstream.call_tool(tool, args, meta=cast(RequestParamsMeta, {KEY_META: step.key}))
        except Exception as exc:  # no answer: the step stays pending, in doubt (HATP-JRN-6)
            text = f"the upstream did not answer ({exc!r}); the call is in doubt and journaled as such"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        if result.is_error:
            await saga.fail_step(step.step_id, _text(result) or "isError")
        else:
            await saga.complete_step(step.step_id, result_document(result))
        if outside:
            await saga.complete()
        return result

    async def _open_saga(self, args: dict[str, Any], tool: str) -> Saga:
        """The saga `tool` acts on: the one named by `saga_id`, else the current one; in progress either way."""
        sid = args.get("saga_id")
        if isinstance(sid, str):
            saga = await self._get(sid)
        elif self._in_saga() and self.current is not None:
            saga = self.current
        else:
            raise HatpError(
                "HATP-PXY-10",
                f"no saga is open on this proxy for {tool}",
                code="NO_SAGA",
                fix="call saga_begin first (calls made outside a saga stand and are never rolled back), or name an "
                "open saga by saga_id (saga_status lists them)",
            )
        if saga.status is not SagaStatus.IN_PROGRESS:
            raise HatpError(
                "HATP-PXY-10",
                f"saga {saga.id} is {saga.status.value}: it has ended",
                path="saga_id",
                code="SAGA_ENDED",
                fix="saga_status shows how it ended; saga_begin starts another",
            )
        return saga

    async def _get(self, saga_id: str) -> Saga:
        try:
            return await self.journal.get(saga_id)
        except HatpError as exc:
            raise HatpError(
                "HATP-PXY-10",
                exc.reason,
                path="saga_id",
                code=exc.code,
                fix="name a saga saga_status listed (sagaId, openSagas)"
                if exc.code == "NO_SUCH_SAGA"
                else "ask the operator: `hatp proxy sagas --data DIR` shows it",
            ) from exc

    async def _saga_tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "saga_begin":
            if self._in_saga() and self.current is not None:
                raise HatpError(
                    "HATP-PXY-10",
                    f"saga {self.current.id} is still in progress",
                    code="SAGA_IN_PROGRESS",
                    fix="end it first: saga_complete or saga_rollback (saga_status shows its steps)",
                )
            given = args.get("name")
            if not isinstance(given, str) or not given or given == OUTSIDE_SAGA:
                raise HatpError(
                    "HATP-PXY-10",
                    f"a saga's name is a non-empty string other than {OUTSIDE_SAGA!r}",
                    path="name",
                    code="BAD_NAME",
                    fix="name the saga after what it does, e.g. 'meeting notes'",
                )
            self.current = await self.journal.begin(given)
            return await self._status(self.current)
        if name == "saga_status":
            sid = args.get("saga_id")
            saga = await self._get(sid) if isinstance(sid, str) else self.current
            if saga is None:
                raise HatpError(
                    "HATP-PXY-10",
                    "no saga has begun on this proxy",
                    code="NO_SAGA",
                    fix="call saga_begin first; calls made outside a saga stand as they are",
                )
            return await self._status(saga)
        saga = await self._open_saga(args, name)
        if name == "saga_complete":
            await saga.complete()
        else:
            await saga.rollback(str(args.get("reason") or "rolled back by the agent"))
        return await self._status(saga)

    async def _status(self, saga: Saga) -> dict[str, Any]:
        return await saga_status(self.journal, saga)


async def saga_status(journal: Journal, saga: Saga) -> dict[str, Any]:
    """The saga's status and steps; `leftInPlace`: the irreversible steps a rollback left standing; `recovered`: a
    restart found it open (HATP-PXY-9); `deadLetters`: why each step was left for a person (HATP-PXY-10);
    `openSagas`: the other sagas still open."""

    steps = []
    for s in saga.steps:
        step: dict[str, Any] = {"stepId": s.step_id, "tool": s.tool, "state": s.state.value, "rollback": s.rollback}
        if s.irreversible:
            step["irreversible"] = True
        if s.error is not None:
            step["error"] = s.error
        steps.append(step)
    out: dict[str, Any] = {"sagaId": saga.id, "name": saga.name, "status": saga.status.value, "steps": steps}
    left = [s.step_id for s in saga.steps if s.rollback == "kept-irreversible"]
    if left:
        out["leftInPlace"] = left
    if any(e.get("event") == "saga.recovered" for e in saga.record()["events"]):
        out["recovered"] = True
        if saga.status is SagaStatus.IN_PROGRESS:
            out["next"] = (
                "the proxy restarted with this saga open and undid nothing: saga_complete keeps its steps, "
                "saga_rollback undoes them"
            )
    dead = [
        {k: row.entry.get(k) for k in ("stepId", "tool", "phase", "error")}
        for row in await journal.store.dead_letters()
        if row.entry.get("sagaId") == saga.id
    ]
    if dead:
        out["deadLetters"] = dead
    others = [sid for sid in await journal.store.unfinished() if sid != saga.id]
    if others:
        out["openSagas"] = others
    return out

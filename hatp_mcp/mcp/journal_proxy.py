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
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

import mcp.types as types
from mcp import Client
from mcp.server import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
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
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.proxy_policy import Gate, LookupCall, ProxyPolicy, UndoCall, compiled
from hatp_mcp.core.signing.canonical import CanonicalError, digest
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.mcp.errors import tool_refusal
from hatp_mcp.mcp.journal_server import KEY_META
from hatp_mcp.mcp.proxy_elicit import url_elicitation
from hatp_mcp.mcp.proxy_gate import GATE_NOTE, ProxyGate, budgets_unconfigured, gated, progress_reporter
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
from hatp_mcp.store.shadow_log import ShadowLog
from hatp_mcp.store.step_rules import StepRules

__all__ = [
    "LOCK",
    "OUTSIDE_SAGA",
    "RECOVERY_POLICY",
    "SAGA_TOOLS",
    "JournalingProxy",
    "proxy_names_free",
    "require_open",
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

    `shadow`: the log shadow mode writes to (HATP-PXY-40); `shadow_mode`: the command line's `--shadow` (the file's
    `"shadow": true` turns it on too); `step_rules`: the rules an older proxy kept apart from its journal, read for the
    steps it journaled (HATP-PXY-44; a step's rule now rides in its own journal entry). Raises HatpError
    HATP-PXY-4/5/6 when the policy does not fit the upstream's tools (nothing is registered), ValueError when the
    upstream already has a tool named as one of the saga tools."""

    def __init__(
        self,
        upstream: Client,
        tools: list[types.Tool],
        journal: Journal,
        policy: ProxyPolicy,
        gate: ProxyGate | None = None,
        *,
        shadow: ShadowLog | None = None,
        shadow_mode: bool = False,
        step_rules: StepRules | None = None,
    ):
        self.upstream = upstream
        self.journal = journal
        self.gate = gate
        self.shadow_log = shadow
        self.shadow_mode = shadow_mode
        self.step_rules = step_rules
        self.current: Saga | None = None
        self.policy = policy
        self.rules: dict[str, ToolRule] = {}
        self.listed: list[types.Tool] = []
        # the undo (and lookup) each step was journaled with, by its key: a reload never changes them (HATP-PXY-44)
        self.journaled_with: dict[str, ToolRule] = {}
        self._registered: dict[str, bool] = {}  # each journaled tool's irreversibility, as the journal knows it
        self.reload: Callable[[], Awaitable[None]] | None = None  # hatp_mcp/mcp/proxy_reload.py, when watched
        self.apply(policy, tools)

    @property
    def shadowing(self) -> bool:
        """Whether refusals are recorded instead of enforced (HATP-PXY-40)."""
        return self.shadow_mode or self.policy.shadow

    def apply(self, policy: ProxyPolicy, tools: list[types.Tool]) -> None:
        """Put `policy` in force over the upstream's `tools`, whole or not at all: every check is made before
        anything changes. Raises HatpError (HATP-PXY-4/5/6, HATP-PXY-20 for a gate the proxy cannot enforce,
        HATP-PXY-23 for budgets it cannot count), ValueError (a saga tool's name taken by the upstream)."""
        proxy_names_free(tools)
        rules = resolve_tools(policy, upstream_tools(tools))
        shadowing = self.shadow_mode or policy.shadow
        listed: list[types.Tool] = []
        gates: list[tuple[str, Gate, dict[str, Any]]] = []
        for t in tools:
            rule = rules[t.name]
            if rule.action == "participant":  # a participant tool is reached by hatp/txn/* only (HATP-PXY-32)
                continue
            if rule.action == "hide" and not shadowing:
                continue
            if rule.action == "irreversible":
                t = t.model_copy(update={"description": f"{t.description or t.name}\n\n{IRREVERSIBLE_NOTE}"})
            if rule.action == "gate":  # HATP-PXY-20..24: hatp_mcp/mcp/proxy_gate.py
                if rule.gate is None:  # the file's reading refused a policy gate without one (HATP-PXY-20)
                    raise BrokenInvariant(f"{t.name}: policy gate without a gate passed the policy file's checks")
                if not shadowing:
                    t = t.model_copy(update={"description": f"{t.description or t.name}\n\n{GATE_NOTE}"})
                gates.append((t.name, rule.gate, t.model_dump(mode="json", by_alias=True, exclude_none=True)))
            listed.append(t)
        if gates:
            gated(self.gate, rules[gates[0][0]]).check(gates, policy.budgets)
        elif self.gate is not None:
            self.gate.check(gates, policy.budgets)
        elif policy.budgets:
            raise budgets_unconfigured(org=False)
        # every check passed: the policy takes effect whole
        if self.gate is not None:
            self.gate.replace(gates, policy.budgets)
        for rule in rules.values():
            if rule.action in ("journal", "irreversible"):
                self._register(rule)
        self.policy, self.rules, self.listed = policy, rules, listed

    def _register(self, rule: ToolRule) -> None:
        """The journal knows the tool by the policy now in force; its undo and lookup are found per step
        (journaled_with), so a step keeps the ones it was journaled with."""
        irreversible = rule.action == "irreversible"
        if self._registered.get(rule.tool) == irreversible:
            return
        self.journal.register(self._undoable(rule.tool, irreversible), replace=True)
        self._registered[rule.tool] = irreversible

    def _undoable(self, tool: str, irreversible: bool) -> Undoable:
        async def never(args: dict[str, Any], key: str) -> Any:
            raise UndoRefused("the proxy makes proxied calls itself")

        if irreversible:
            return undoable(tool, never, lookup=self._lookup_of(tool), irreversible=True)
        return undoable(tool, never, self._undo_of(tool), self._lookup_of(tool))

    def _rule_for(self, tool: str, key: str) -> ToolRule:
        """The rule a step was journaled with (this run), else the one in force (a step from before a restart)."""
        step = key.removesuffix(":undo")  # (an undo's key is its step's, and ":undo")
        kept = self.journaled_with.get(step)
        if kept is None:  # from the step's own entry (after a restart), else where an older proxy kept it
            kept = _rule_from(tool, self.journal.step_rule(step))
        if kept is None and self.step_rules is not None:
            kept = _rule_from(tool, self.step_rules.get(step))
        if kept is not None:  # HATP-PXY-44: a reload since never changes the undo a step was journaled with
            return kept
        return self.rules.get(tool) or ToolRule(tool, "deny")

    def _undo_of(self, tool: str) -> Undo:
        async def undo(args: dict[str, Any], output: Any, key: str) -> Any:
            call = self._rule_for(tool, key).undo
            if call is None:
                raise UndoRefused(f"the policy in force names no undo for {tool!r}: the step is left for a person")
            return await self._undo(tool, call)(args, output, key)

        return undo

    def _lookup_of(self, tool: str) -> LookupFn:
        async def lookup(args: dict[str, Any], key: str) -> Happened | DidNotHappen | None:
            call = self._rule_for(tool, key).lookup
            if call is None:
                return None
            return await self._lookup(tool, call)(args, key)

        return lookup

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
        """The MCP server of the proxy. It declares `tools.listChanged` and tells its clients when a reload changed
        the listing (HATP-PXY-72): on a handshake-era connection by `notifications/tools/list_changed` to the client
        whose request took the reload, on a 2026-07-28 one through every `subscriptions/listen` stream."""
        bus = InMemorySubscriptionBus()

        async def reloaded(ctx: Any) -> None:
            before = self.listed  # (apply puts a new list in force: the same list is the same listing)
            if self.reload is not None:  # HATP-PXY-42: the file as it is now, before the request is handled
                await self.reload()
            if self.listed is before or _listing(self.listed) == _listing(before):  # HATP-PXY-72: nothing to tell
                return
            await bus.publish(ToolsListChanged())
            try:  # (the SDK drops it on a 2026-07-28 connection: the bus reached those)
                await ctx.session.send_tool_list_changed()
            except Exception as exc:  # a client gone away: the request's own answer tells it the same
                print(f"journal-proxy: could not send tools/list_changed ({type(exc).__name__})", file=sys.stderr)

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            await reloaded(ctx)  # a changed policy file takes effect before the answer (HATP-PXY-42)
            return types.ListToolsResult(tools=[*self.listed, *SAGA_TOOLS])

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            await reloaded(ctx)  # HATP-PXY-42: the call is handled by the file as it is now
            return await self.handle(ctx, params)

        server: Server[Any] = Server(
            name,
            version="0.1.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_subscriptions_listen=ListenHandler(bus),
        )
        capabilities = server.get_capabilities

        def declared(*args: Any, **kwargs: Any) -> types.ServerCapabilities:
            caps = capabilities(*args, **kwargs)
            if caps.tools is None:  # pragma: no cover - the server lists tools
                return caps
            return caps.model_copy(update={"tools": caps.tools.model_copy(update={"list_changed": True})})

        server.get_capabilities = declared  # type: ignore[method-assign]
        return server

    async def handle(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        """One tool call, by the policy in force (HATP-PXY-7..10, 21..23; in shadow mode HATP-PXY-40, 41)."""
        args = dict(params.arguments or {})
        try:
            if params.name in _SAGA_NAMES:  # a refusal is the tool's result, never a JSON-RPC error (HATP-PXY-10)
                return _json_result(await self._saga_tool(params.name, args))
        except HatpError as exc:
            return tool_refusal(exc)
        rule = self.rules.get(params.name)
        if rule is None:  # HATP-PXY-41: a tool the upstream does not have is refused in shadow mode too
            return tool_refusal(_unknown(params.name))
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
        if rule.action in ("hide", "deny", "gate"):
            if not self.shadowing:
                if rule.action == "gate":
                    return await self._gated(ctx, params, args)
                return tool_refusal(_unknown(params.name) if rule.action == "hide" else _denied(params.name))
            try:  # shadow mode: recorded (durable) before it is forwarded; an unwritable log refuses the call
                self._shadowed(rule, args)
            except HatpError as exc:
                return tool_refusal(exc)
            return await self.upstream.call_tool(params.name, args)
        if rule.action == "pass":
            return await self.upstream.call_tool(params.name, args)
        try:
            result = await self._journaled(rule, args)
        except HatpError as exc:
            return tool_refusal(exc)
        if rule.action == "irreversible":  # every result says so (HATP-PXY-8)
            note = types.TextContent(type="text", text=IRREVERSIBLE_NOTE)
            result = result.model_copy(update={"content": [*result.content, note]})
        return result

    def _shadowed(self, rule: ToolRule, args: dict[str, Any]) -> None:
        """Record the refusal the policy would have given this call (HATP-PXY-40): its rule, code, reason and path,
        and the digest of the arguments, never the arguments (HATP-PXY-41). Raises HatpError HATP-PXY-40 when the
        log cannot be written: the call is then refused."""
        log = self.shadow_log
        if rule.action == "hide":
            refusal = _unknown(rule.tool)
        elif rule.action == "deny":
            refusal = _denied(rule.tool)
        else:
            if self.gate is None:
                raise BrokenInvariant(f"{rule.tool} is gated and the proxy has no gate")
            tool = next(t for t in self.listed if t.name == rule.tool)
            try:  # (its spend is kept in the shadow ledger, HATP-PXY-73)
                refusal = self.gate.would_refuse(
                    rule.tool, tool.model_dump(mode="json", by_alias=True, exclude_none=True), args
                )
            except (OSError, sqlite3.Error) as exc:
                raise _unwritable(f"the shadow ledger: {type(exc).__name__}") from None
        try:
            arguments: str | None = digest(args)
        except CanonicalError:
            arguments = None
        entry: dict[str, Any] = {
            "at": format_ts(self.journal.clock.now()),
            "tool": rule.tool,
            "policy": rule.action,
            "rule": refusal.rule,
            "code": refusal.code,
            "reason": refusal.reason,
            "argumentsDigest": arguments,
        }
        if refusal.path:
            entry["path"] = refusal.path
        if log is None:  # (a proxy run only to end a saga keeps none)
            raise _unwritable("no shadow log is kept")
        try:
            log.record(entry)
        except (OSError, sqlite3.Error) as exc:
            raise _unwritable(type(exc).__name__) from None

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

    async def _journaled(self, rule: ToolRule, args: dict[str, Any]) -> types.CallToolResult:
        """One journaled call: a step of the current saga, or (outside any) of a saga of its own, completed once
        its answer is written (HATP-PXY-9): no rollback of the model's reaches it."""
        tool = rule.tool
        outside = not self._in_saga()
        # durable before the call goes upstream (HATP-JRN-2), with the rule it will be undone by (HATP-PXY-44); a
        # call outside any saga begins its saga of its own in that same write (HATP-JRN-25)
        if outside:
            saga, step = await self.journal.one_call(OUTSIDE_SAGA, tool, args, _rule_wire(rule))
        elif self.current is None:
            raise BrokenInvariant("a call inside a saga found no current saga")
        else:
            saga = self.current
            step = await saga.add_step(tool, args, rule=_rule_wire(rule))
        self.journaled_with[step.key] = rule  # its undo and lookup, whatever a reload puts in force
        try:
            result = await self.upstream.call_tool(tool, args, meta=cast(RequestParamsMeta, {KEY_META: step.key}))
        except Exception as exc:  # no answer: the step stays pending, in doubt (HATP-JRN-6)
            text = f"the upstream did not answer ({exc!r}); the call is in doubt and journaled as such"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        if result.is_error:  # (a saga of its own completes in the same write as its result)
            await saga.fail_step(step.step_id, _text(result) or "isError", close=outside)
        else:
            await saga.complete_step(step.step_id, result_document(result), close=outside)
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
        return require_open(saga)

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


def _rule_wire(rule: ToolRule) -> dict[str, Any]:
    return {
        "action": rule.action,
        "undo": rule.undo.wire() if rule.undo is not None else None,
        "lookup": rule.lookup.wire() if rule.lookup is not None else None,
    }


def _rule_from(tool: str, kept: dict[str, Any] | None) -> ToolRule | None:
    """The rule kept for a step, or None (none kept, or one this version cannot read: the file's then applies)."""
    if kept is None:
        return None
    try:
        undo = UndoCall.model_validate(kept["undo"]) if kept.get("undo") is not None else None
        lookup = LookupCall.model_validate(kept["lookup"]) if kept.get("lookup") is not None else None
        return ToolRule(tool, str(kept["action"]), undo, lookup)
    except (KeyError, ValueError):
        return None


def _unknown(tool: str) -> HatpError:
    return HatpError(
        "HATP-PXY-7",
        f"there is no tool named {tool!r} here",
        path="name",
        code="UNKNOWN_TOOL",
        fix="call one of the tools tools/list gives",
    )


def _unwritable(why: str) -> HatpError:
    return HatpError(
        "HATP-PXY-40",
        f"the shadow log cannot be written ({why}): the call was not sent",
        path="shadow",
        code="SHADOW_LOG_UNWRITABLE",
        fix="give the proxy a writable --data folder",
    )


def _denied(tool: str) -> HatpError:
    return HatpError(
        "HATP-PXY-7",
        f"the proxy's policy denies {tool!r}: the call was not sent",
        path="name",
        code="TOOL_DENIED",
        fix="do without it, or ask the operator to change the tool's policy in the proxy's policy file",
    )


def require_open(saga: Saga, fix: str = "saga_status shows how it ended; saga_begin starts another") -> Saga:
    """The saga, when it is still in progress. Raises HatpError HATP-PXY-10 (`SAGA_ENDED`) naming `fix`: what the
    one who asked (the model, or the operator) can do instead."""
    if saga.status is not SagaStatus.IN_PROGRESS:
        raise HatpError(
            "HATP-PXY-10",
            f"saga {saga.id} is {saga.status.value}: it has ended",
            path="saga_id",
            code="SAGA_ENDED",
            fix=fix,
        )
    return saga


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


def _listing(tools: list[types.Tool]) -> list[dict[str, Any]]:
    """What `tools/list` shows of `tools`, to tell whether a reload changed it (HATP-PXY-72)."""
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]

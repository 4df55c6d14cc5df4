"""`serve_journal(server, journal, links)`: the journal as an MCP server for agents, and its undos over MCP.

Tools (the names agent-undo users know): `saga_begin`, `saga_add_step`, `saga_complete_step`, `saga_fail_step`,
`saga_rollback`, `saga_status`, `saga_list_steps`, and `saga_complete` to end a saga whose steps all went
through. The agent makes each step's call itself; it registers the step first (durable before `saga_add_step`
answers, with the idempotency key to send along) and reports the result after. The undo it registers is
`{server, tool, arguments}` (HATP-JRN-13, hatp_mcp/core/journal/undo_spec.py): `server` is a name on the
operator's allow-list, whose connection is a `Link`; on rollback the journal calls that tool with exactly those
arguments and the undo's idempotency key in `_meta` (`io.hatp/idempotencyKey`). There is no way to register a
command to run. Over streamable HTTP every tool call carries a caller's bearer token and acts only on that
caller's sagas (HATP-JRN-17, hatp_mcp/mcp/http_callers.py); over stdio the parent process is the caller.
Refusals leave through hatp_mcp.mcp.errors only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, cast

from mcp import MCPError
from mcp.server import MCPServer
from mcp.types import RequestParamsMeta

from hatp_mcp.core.gated_tools.checks import APPROVAL_META_KEY
from hatp_mcp.core.journal.machine import StepView
from hatp_mcp.core.journal.undo_spec import UndoSpec, parse_undo
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import to_mcp_error
from hatp_mcp.mcp.http_callers import CallerTokens, caller_middleware, current_caller, not_owner
from hatp_mcp.mcp.journal_undo_approvals import APPROVAL_INVALID_CODE, APPROVAL_REQUIRED_CODE, UndoApprovals
from hatp_mcp.mcp.server_links import LOST, Link
from hatp_mcp.runtime.journal.driver import Journal, Saga
from hatp_mcp.runtime.journal.undoable import Undoable, UndoRefused, undoable

__all__ = ["AGENT_STEP", "AGENT_STEP_FINAL", "JOURNAL_TOOLS", "KEY_META", "McpUndo", "agent_tools", "serve_journal"]

KEY_META = "io.hatp/idempotencyKey"
AGENT_STEP = "agent.step"  # a step the agent ran, undone by the MCP call it registered
AGENT_STEP_FINAL = "agent.step.no-undo"  # a step the agent ran that declares no undo
AGENT_PIVOT = "agent.pivot"  # a step that cannot be undone: rollback stops there
JOURNAL_TOOLS = (
    "saga_begin",
    "saga_add_step",
    "saga_complete_step",
    "saga_fail_step",
    "saga_rollback",
    "saga_status",
    "saga_list_steps",
    "saga_complete",
)


class McpUndo:
    """Undoes an agent's step by the MCP tool call it registered, on a server of the allow-list; an undo tool that
    is approval-gated is approved first through the Human Gateway (`approvals`, HATP-JRN-15)."""

    def __init__(
        self,
        links: Mapping[str, Link],
        *,
        timeout: float = 30.0,
        tools: Mapping[str, Collection[str] | None] | None = None,
        approvals: UndoApprovals | None = None,
    ) -> None:
        """`tools`: per server, the only tools an undo may call there (a server not named, or None: any).
        `approvals`: how a gated undo is approved; without it a gated undo fails at once (a dead letter)."""
        self.links = links
        self.timeout = timeout
        self.allowed: dict[str, Collection[str] | None] = {name: (tools or {}).get(name) for name in links}
        self.approvals = approvals

    async def undo(self, args: dict[str, Any], output: Any, key: str) -> Any:
        """Raises UndoRefused (not on the allow-list any more, or a gated undo not approved: never retried) or
        RuntimeError (a failed attempt)."""
        try:
            spec = parse_undo(args.get("undo"), self.allowed, "args.undo")  # again: the list may have changed
        except HatpError as exc:
            raise UndoRefused(exc.one_line()) from exc
        meta: dict[str, Any] = {KEY_META: key}
        try:
            return await self._call(spec, meta)
        except MCPError as exc:
            if exc.code != APPROVAL_REQUIRED_CODE:
                raise RuntimeError(f"{spec.server}/{spec.tool}: {exc}") from exc
            if self.approvals is None:
                raise UndoRefused(
                    f"HATP-JRN-15: {spec.server}/{spec.tool} requires a human approval and this journal has no"
                    " gateway to ask (servers.journal --gateway)"
                ) from exc
            need = exc.data.get("data") if isinstance(exc.data, dict) else None
            approval = await self.approvals.approve(need if isinstance(need, dict) else {}, spec.tool, spec.arguments)
        try:
            return await self._call(spec, {**meta, APPROVAL_META_KEY: approval})
        except MCPError as exc:
            if exc.code in (APPROVAL_REQUIRED_CODE, APPROVAL_INVALID_CODE):
                data = exc.data if isinstance(exc.data, dict) else {}
                raise UndoRefused(
                    f"HATP-JRN-15: {spec.server}/{spec.tool} refused the approval the gateway signed: "
                    f"{data.get('rule')}: {data.get('reason') or exc}"
                ) from exc
            raise RuntimeError(f"{spec.server}/{spec.tool}: {exc}") from exc

    async def _call(self, spec: UndoSpec, meta: dict[str, Any]) -> Any:
        """One call of the undo tool. Raises MCPError (the server's JSON-RPC error) or RuntimeError (lost, or the
        tool answered isError)."""
        link = self.links[spec.server]
        client = await link.client()
        try:
            result = await client.call_tool(
                spec.tool, spec.arguments, read_timeout_seconds=self.timeout, meta=cast(RequestParamsMeta, meta)
            )
        except MCPError:
            raise
        except Exception as exc:  # a lost connection (the SDK raises groups): reconnect on the next attempt
            link.lost(client)
            raise RuntimeError(f"{spec.server}/{spec.tool}: {LOST[0].lower()}: {exc!r}") from exc
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            raise RuntimeError(f"{spec.server}/{spec.tool} failed: {text or 'isError'}")
        return result.structured_content


async def _never(args: dict[str, Any], key: str) -> Any:
    raise UndoRefused("an agent's step is run by the agent, never by the journal")


def agent_tools(undoer: McpUndo) -> list[Undoable]:
    """The journal's names for agents' steps: with an MCP undo, without one, and a pivot."""
    return [
        undoable(AGENT_STEP, _never, undoer.undo),
        undoable(AGENT_STEP_FINAL, _never),
        undoable(AGENT_PIVOT, _never, pivot=True),
    ]


def _step(v: StepView) -> dict[str, Any]:
    out: dict[str, Any] = {
        "stepId": v.step_id,
        "action": v.args.get("action"),
        "state": v.state.value,
        "key": v.key,
        "pivot": v.pivot,
        "undo": v.args.get("undo"),
    }
    if v.output is not None:
        out["output"] = v.output
    if v.error is not None:
        out["error"] = v.error
    if v.rollback is not None:
        out["rollback"] = v.rollback
    if v.undo_attempts:
        out["undoAttempts"] = v.undo_attempts
    if v.retry_at is not None:
        out["retryAt"] = v.retry_at
    return out


def _status(saga: Saga, record: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "sagaId": saga.id,
        "name": saga.name,
        "status": saga.status.value,
        "steps": [_step(v) for v in saga.steps],
    }
    if saga.owner is not None:
        out["owner"] = saga.owner
    if saga.stopped_at is not None:
        out["stoppedAt"] = saga.stopped_at
    if saga.dead_letters:
        out["deadLetters"] = list(saga.dead_letters)
    if record:
        out["record"] = saga.record()
    return out


async def _answer(work: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    try:
        return await work()
    except HatpError as exc:
        raise to_mcp_error(exc) from exc


def _caller_id() -> str | None:
    caller = current_caller()
    return caller.id if caller is not None else None


def serve_journal(server: MCPServer, journal: Journal, undoer: McpUndo, callers: CallerTokens | None = None) -> None:
    """Register the saga tools on `server`. `undoer`: the operator's allow-list of undo servers (and tools).
    `callers`: the bearer tokens every tool call over HTTP must carry (HATP-JRN-17; required for HTTP: without it
    any local process could call any saga's tools); each saga is then acted on only for the caller that began it."""
    allowed = undoer.allowed
    if callers is not None:
        server.middleware.append(caller_middleware(callers))

    async def mine(saga_id: str) -> Saga:
        """The saga, if the caller may act on it (over stdio: the parent process may act on any)."""
        saga = await journal.get(saga_id)
        caller = current_caller()
        if caller is not None and saga.owner != caller.id:
            raise not_owner(saga_id, saga.owner, caller.id)
        return saga

    async def saga_begin(name: str) -> dict[str, Any]:
        """Begin a saga: a named list of steps, each with its declared undo. Returns its sagaId. When a later step
        fails, call saga_rollback and the journal undoes the completed steps, last first."""

        async def work() -> dict[str, Any]:
            return _status(await journal.begin(name, owner=_caller_id()))

        return await _answer(work)

    async def saga_add_step(
        saga_id: str, action: str, undo: dict[str, Any] | str | None = None, pivot: bool = False
    ) -> dict[str, Any]:
        """Register a step BEFORE you make its call. `action`: what you are about to do. `undo`: how to undo it, as
        an MCP tool call {"server": <a server on the journal's allow-list>, "tool": <tool name>, "arguments":
        {...}} (never a command: none is run). `pivot`: the step cannot be undone; rollback stops there. Returns
        the stepId and the idempotency `key` to send with your call; then report saga_complete_step or
        saga_fail_step."""

        async def work() -> dict[str, Any]:
            saga = await mine(saga_id)
            if pivot and undo is not None:
                raise HatpError("HATP-JRN-13", "a pivot cannot be undone: register it without an undo", path="undo")
            args: dict[str, Any] = {"action": action}
            if undo is not None:
                args["undo"] = parse_undo(undo, allowed).wire()
            tool = AGENT_PIVOT if pivot else AGENT_STEP if undo is not None else AGENT_STEP_FINAL
            return _step(await saga.add_step(tool, args))

        return await _answer(work)

    async def saga_complete_step(saga_id: str, step_id: str, output: Any = None) -> dict[str, Any]:
        """Report that a step's call succeeded, with what it returned."""

        async def work() -> dict[str, Any]:
            return _step(await (await mine(saga_id)).complete_step(step_id, output))

        return await _answer(work)

    async def saga_fail_step(saga_id: str, step_id: str, error: str) -> dict[str, Any]:
        """Report that a step's call failed (nothing happened). Then call saga_rollback to undo the earlier steps."""

        async def work() -> dict[str, Any]:
            return _step(await (await mine(saga_id)).fail_step(step_id, error))

        return await _answer(work)

    async def saga_rollback(saga_id: str, reason: str = "rolled back by the agent") -> dict[str, Any]:
        """Undo the saga's completed steps, last first, through their registered MCP undo calls. Answers when the
        rollback has ended: ROLLED_BACK, or ROLLBACK_FAILED with the dead letters a person must finish."""

        async def work() -> dict[str, Any]:
            saga = await mine(saga_id)
            await saga.rollback(reason)
            return _status(saga)

        return await _answer(work)

    async def saga_complete(saga_id: str) -> dict[str, Any]:
        """End a saga whose steps all went through: nothing will be undone. Refused while a step is pending."""

        async def work() -> dict[str, Any]:
            saga = await mine(saga_id)
            await saga.complete()
            return _status(saga)

        return await _answer(work)

    async def saga_status(saga_id: str, include_record: bool = False) -> dict[str, Any]:
        """A saga's status and steps; with include_record, its signed journal record (check it: hatp verify)."""

        async def work() -> dict[str, Any]:
            return _status(await mine(saga_id), include_record)

        return await _answer(work)

    async def saga_list_steps(saga_id: str) -> dict[str, Any]:
        """A saga's steps, in order, with their states and what rollback did with each."""

        async def work() -> dict[str, Any]:
            return {"sagaId": saga_id, "steps": _status(await mine(saga_id))["steps"]}

        return await _answer(work)

    for fn in (
        saga_begin,
        saga_add_step,
        saga_complete_step,
        saga_fail_step,
        saga_rollback,
        saga_status,
        saga_list_steps,
        saga_complete,
    ):
        server.add_tool(fn, name=fn.__name__, description=fn.__doc__)

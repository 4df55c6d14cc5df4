"""The single boundary between core refusals (HatpError) and JSON-RPC errors on the MCP wire, both ways.

Server side, `to_mcp_error` turns a HatpError into `MCPError(code, message, data)` with a stable numeric code
from CODES, the refusal's text as `message` (clients show the message, seldom `data`) and its rule, path, reason
and fix as `data`; `tool_refusal` turns it into the tool result an agent-facing tool answers with (`isError`, the
same text, the same data structured: HATP-MCP-25), and `tool_result` a success into its tool result. Client side,
`from_mcp_error` turns a received MCPError back into a HatpError, and a transport failure (timeout, connection
closed, unreachable server) into `TransportFailed`, which means "no answer": for a commit that is in doubt, never
a refusal. No other module maps errors; this one must not do IO.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec

import anyio
from mcp import MCPError
from mcp.types import CallToolResult, TextContent

from hatp_mcp.errors import HatpError, TransportFailed

__all__ = [
    "CODES",
    "DEFAULT_CODE",
    "INVALID_PARAMS",
    "REQUEST_TIMEOUT",
    "agent_tool",
    "agent_tool_sync",
    "cause",
    "code_for",
    "from_mcp_error",
    "refusal_text",
    "to_mcp_error",
    "tool_refusal",
    "tool_result",
]

INVALID_PARAMS = -32602
REQUEST_TIMEOUT = -32001  # the SDK's per-request read timeout
CONNECTION_CLOSED = -32000  # the SDK's "Connection closed" on a dead stdio child
METHOD_NOT_FOUND = -32601

# Stable machine name -> JSON-RPC error code. Codes never change meaning; new names get new codes.
CODES: dict[str, int] = {
    "APPROVAL_REQUIRED": -32050,
    "PRECONDITION_CHANGED": -32051,
    "PLAN_MISMATCH": -32052,
    "SIGNATURE_INVALID": -32053,
    "LOCKED": -32054,
    "STALE_TOKEN": -32055,
    "HOLD_LOST": -32056,
    "NOT_PREPARED": -32057,
    "IRREVERSIBLE": -32058,
    "UNDO_WINDOW_PASSED": -32059,
    "ILLEGAL_TRANSITION": -32060,
    "COST_UNDERSTATED": -32061,
    "UNKNOWN_TXN": -32062,
    "NOT_A_HOLD": -32063,
    "UNSUPPORTED": -32064,
    "APPROVAL_INVALID": -32065,  # gated tools (spec/gated-tools.md): an approval was given and does not fit
    "BAD_ARGUMENTS": -32066,  # an agent tool's arguments outside its input schema (HATP-MCP-50)
    # acting only for a trusted coordinator (spec/mcp-binding.md HATP-TRUST-1..12)
    "COORDINATOR_UNPROVEN": -32080,
    "AUTH_MISMATCH": -32081,
    "AUTH_EXPIRED": -32082,
    "TXN_BOUND": -32083,
    "NO_TRUSTED_COORDINATOR": -32084,
    "DECISION_UNPROVEN": -32085,
    "VOTE_MISMATCH": -32086,
    "STALE_COORDINATOR": -32087,
    "HEAD_REORDERED": -32088,  # a commit decided before the vote it rests on (spec/hatp.md HATP-REC-23)
    # callers over HTTP: the journal (spec/journal.md HATP-JRN-17) and the coordinator (HATP-MCP-53)
    "CALLER_UNPROVEN": -32089,
    "NOT_SAGA_OWNER": -32090,
    "NOT_TXN_OWNER": -32091,
}
DEFAULT_CODE = -32069  # any other HATP refusal: still a refusal, never a success
P = ParamSpec("P")
LISTED = 64  # violations or schema errors written out in a refusal's text; every one stays in its data


def cause(exc: BaseException) -> str:
    """What went wrong, in words a model can act on: the innermost error of an exception group (the SDK raises
    groups of transport errors), by its message or, when it has none, its kind; never a repr (HATP-MCP-47)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    while exc.__cause__ is not None and not str(exc):
        exc = exc.__cause__
    text = " ".join(str(exc).split())
    if isinstance(exc, ConnectionRefusedError) or "refused" in text.lower():
        return "connection refused"
    if "Connect" in type(exc).__name__ or isinstance(exc, ConnectionError):
        return f"cannot connect: {text}"[:300] if text else "cannot connect"
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)):
        return "the connection was closed"
    return (text or type(exc).__name__)[:300]


def code_for(exc: HatpError) -> int:
    """The JSON-RPC code for a refusal: schema errors are invalid params, signatures one code, else CODES."""
    if exc.rule.startswith("HATP-OBJ-"):
        return INVALID_PARAMS
    if exc.rule.startswith("HATP-SIG-"):
        return CODES["SIGNATURE_INVALID"]
    return CODES.get(exc.code, DEFAULT_CODE)


def _items(exc: HatpError) -> list[str]:
    """Each violation (a plan refused, HATP-TXN-1) or schema error (HATP-OBJ-3) of the refusal, one line each:
    rule, path, and its message, which says what is wrong and what to do instead."""
    out: list[str] = []
    for key in ("violations", "errors"):
        items = exc.data.get(key)
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, Mapping):
                rule = _str(item.get("rule"), exc.rule)
                path = _str(item.get("path"), "$")
                text = _str(item.get("message")) or _str(item.get("reason"))
                out.append(f"- {rule} at {path}: {text}")
    return out


def refusal_text(exc: HatpError) -> str:
    """What a model (or a person) reads of a refusal, needing nothing else: the machine name, the rule and the
    JSON path, the reason, what to do, and every violation with its rule, path and fix."""
    where = f" at {exc.path}" if exc.path else ""
    lines = [f"{exc.code}: refused under {exc.rule}{where}: {exc.reason}"]
    if exc.fix:
        lines.append(f"What to do: {exc.fix}")
    items = _items(exc)
    if items:
        lines.append(f"Every problem ({len(items)}), each with its rule, JSON path and fix:")
        lines.extend(items[:LISTED])
        if len(items) > LISTED:
            lines.append(f"... and {len(items) - LISTED} more (in the structured content)")
    return "\n".join(lines)


def to_mcp_error(exc: HatpError) -> MCPError:
    """HATP-MCP-3: a refusal on the wire: its stable code, its text as message (beginning with the machine name),
    the whole refusal as data."""
    data: dict[str, Any] = dict(exc.to_dict())
    return MCPError(code=code_for(exc), message=refusal_text(exc), data=data)


def tool_refusal(exc: HatpError) -> CallToolResult:
    """HATP-MCP-25: an agent-facing tool's refusal as its result: `isError`, the refusal's text (what the model
    reads) and the refusal itself as structured content `{"refusal": {rule, code, reason, path?, fix?, data?}}`."""
    return CallToolResult(
        content=[TextContent(type="text", text=refusal_text(exc))],
        structured_content={"refusal": exc.to_dict()},
        is_error=True,
    )


def tool_result(result: dict[str, Any]) -> CallToolResult:
    """An agent-facing tool's answer: the wire object as structured content and as JSON text."""
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(result, indent=2, ensure_ascii=False))],
        structured_content=result,
    )


def agent_tool(fn: Callable[P, Awaitable[dict[str, Any]]]) -> Callable[P, Awaitable[CallToolResult]]:
    """An agent-facing tool: its answer becomes `tool_result`, a HatpError it raises `tool_refusal` (HATP-MCP-25).

    The wrapper keeps `fn`'s signature (the SDK reads parameters and the output schema through `__wrapped__`)."""

    @functools.wraps(fn)
    async def tool(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return tool_result(await fn(*args, **kwargs))
        except HatpError as exc:
            return tool_refusal(exc)

    return tool


def agent_tool_sync(fn: Callable[P, dict[str, Any]]) -> Callable[P, CallToolResult]:
    """`agent_tool` for a tool that does blocking work (the SDK runs it on a worker thread)."""

    @functools.wraps(fn)
    def tool(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return tool_result(fn(*args, **kwargs))
        except HatpError as exc:
            return tool_refusal(exc)

    return tool


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def from_mcp_error(err: MCPError, method: str) -> HatpError:
    """The HatpError a received JSON-RPC error stands for.

    A timeout or closed connection gives TransportFailed (HATP-MCP-6); an error carrying a HATP refusal in
    `data` gives that refusal back with its rule, path and fix; any other error is a refusal under HATP-MCP-3
    naming the code, so an unknown error never reads as success.
    """
    code = err.code
    if code in (REQUEST_TIMEOUT, CONNECTION_CLOSED):
        name = "TIMEOUT" if code == REQUEST_TIMEOUT else "CONNECTION_CLOSED"
        return TransportFailed(
            "HATP-MCP-6",
            f"{method}: no answer ({err.message})",
            code=name,
            fix="ask again with the same txnId and branchId; the call is idempotent",
        )
    data = err.error.data if isinstance(err.error.data, Mapping) else {}
    rule = _str(data.get("rule"))
    if rule.startswith("HATP-"):
        extra = data.get("data")
        return HatpError(
            rule,
            _str(data.get("reason"), err.message),
            path=_str(data.get("path")),
            fix=_str(data.get("fix")),
            code=_str(data.get("code"), err.message.split(":", 1)[0]),
            data=dict(extra) if isinstance(extra, Mapping) else None,
        )
    return HatpError(
        "HATP-MCP-3",
        f"{method}: JSON-RPC error {code}: {err.message}",
        code="METHOD_NOT_FOUND" if code == METHOD_NOT_FOUND else "RPC_ERROR",
        fix="check that the server speaks HATP (capabilities.extensions['ai.probita/human-gateway'])",
    )

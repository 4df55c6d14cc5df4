"""`HatpServer`: the SDK's MCPServer whose agent tools refuse arguments that do not fit the HATP way (HATP-MCP-50).

The SDK checks a tool's arguments against the model it builds from the function's signature and, when they do not
fit, answers with its own text ("Error executing tool X: 2 validation errors for XArguments ..." and a pydantic
URL), which names no rule and says no fix; arguments the tool does not define it ignores. Here both become the
tool refusal every agent tool answers with (HATP-MCP-25): `BAD_ARGUMENTS` under HATP-MCP-50, every problem with its
JSON path, what is wrong and what to do, and the tool's parameters named. Anything else the SDK raises or answers
is left as it is.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError

from hatp_mcp.core.model.wire import error_path
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import tool_refusal

__all__ = ["HatpServer", "bad_arguments"]

RULE = "HATP-MCP-50"


class HatpServer(MCPServer):
    """An MCPServer whose tool calls with arguments outside a tool's input schema are refused under HATP-MCP-50."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._parameters: dict[str, dict[str, Any]] | None = None

    def add_tool(self, *args: Any, **kwargs: Any) -> None:
        super().add_tool(*args, **kwargs)
        self._parameters = None  # read again at the next call

    async def _schema(self, name: str) -> dict[str, Any] | None:
        if self._parameters is None:
            self._parameters = {t.name: dict(t.input_schema) for t in await self.list_tools()}
        return self._parameters.get(name)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        schema = await self._schema(name)
        if schema is not None:
            known = list((schema.get("properties") or {}).keys())
            unknown = [k for k in arguments if k not in known]
            if unknown and schema.get("additionalProperties") is not True:
                problems = [
                    (f"$.{k}", f"{k!r} is not a parameter of {name}. Remove it, or check its spelling.")
                    for k in unknown
                ]
                return tool_refusal(bad_arguments(name, known, problems))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            known = list(((schema or {}).get("properties") or {}).keys())
            return tool_refusal(bad_arguments(name, known, _problems(cause)))


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    out = []
    for err in exc.errors(include_url=False):
        inner = error_path(tuple(err["loc"]))
        path = "$" if inner == "$" else f"${'' if inner.startswith('[') else '.'}{inner}"
        where = "the arguments" if inner == "$" else inner
        if err["type"] == "missing":
            out.append((path, f"{where} is required and missing. Add {where}."))
        else:
            got = _shown(err.get("input"))
            out.append((path, f"{where} is {got}: {err['msg']}. Give {where} a value its description allows."))
    return out


def _shown(value: Any) -> str:
    """The caller's own value, short (it goes back to the caller that sent it)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def bad_arguments(tool: str, parameters: list[str], problems: list[tuple[str, str]]) -> HatpError:
    """HATP-MCP-50: the arguments of `tool` do not fit its input schema; `problems` are (JSON path, message)."""
    listed = ", ".join(parameters) if parameters else "none"
    return HatpError(
        RULE,
        f"the arguments of {tool} do not fit its input schema ({len(problems)} problem"
        f"{'' if len(problems) == 1 else 's'})",
        path=problems[0][0] if problems else "$",
        code="BAD_ARGUMENTS",
        fix=f"call {tool} with the parameters its input schema describes ({listed}), each as described",
        data={"errors": [{"rule": RULE, "path": p, "message": m} for p, m in problems]},
    )

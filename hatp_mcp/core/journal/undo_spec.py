"""The undo an agent registers with the journal's MCP server: `{server, tool, arguments}`, checked (HATP-JRN-13).

`server` must name a server on the operator's allow-list; `tool` is a tool name; `arguments` is a JSON object sent
as the tool call's arguments exactly as registered: data, never a template, never interpolated into anything.
There is no way to register a shell command: a string, or an object with any other member, is refused. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.errors import HatpError

__all__ = ["UndoSpec", "parse_undo"]

RULE = "HATP-JRN-13"
_TOOL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$")
_SHELLISH = ("command", "cmd", "shell", "script", "exec", "run", "args", "argv")


@dataclass(frozen=True, slots=True)
class UndoSpec:
    server: str
    tool: str
    arguments: dict[str, Any]

    def wire(self) -> dict[str, Any]:
        return {"server": self.server, "tool": self.tool, "arguments": self.arguments}


def parse_undo(
    value: object, allowed: Collection[str] | Mapping[str, Collection[str] | None], path: str = "undo"
) -> UndoSpec:
    """Check a registered undo against the allow-list: the servers, and (a mapping) for each the tools an undo may
    call there (None: any). Raises HatpError HATP-JRN-13 (`SHELL_REFUSED`, `SERVER_NOT_ALLOWED`,
    `TOOL_NOT_ALLOWED`, `BAD_UNDO`) naming the path and what to register instead, or HATP-CANON-2."""
    fix = 'register {"server": <a server on the journal\'s allow-list>, "tool": <its tool>, "arguments": {...}}'
    if isinstance(value, str):
        raise HatpError(
            RULE,
            "an undo is an MCP tool call, never a shell command: the journal runs no commands",
            path=path,
            code="SHELL_REFUSED",
            fix=fix,
        )
    if not isinstance(value, dict):
        raise HatpError(
            RULE, f"an undo is a JSON object, not {type(value).__name__}", path=path, code="BAD_UNDO", fix=fix
        )
    extra = sorted(set(value) - {"server", "tool", "arguments"})
    if extra:
        shellish = [k for k in extra if k.lower() in _SHELLISH]
        raise HatpError(
            RULE,
            f"an undo has exactly server, tool and arguments; {extra} "
            + ("look like a command to run, which the journal never does" if shellish else "are not allowed"),
            path=f"{path}.{extra[0]}",
            code="SHELL_REFUSED" if shellish else "BAD_UNDO",
            fix=fix,
        )
    server, tool, arguments = value.get("server"), value.get("tool"), value.get("arguments", {})
    if not isinstance(server, str) or not server:
        raise HatpError(RULE, "the undo names no server", path=f"{path}.server", code="BAD_UNDO", fix=fix)
    if server not in allowed:
        raise HatpError(
            RULE,
            f"server {server!r} is not on the journal's allow-list {sorted(allowed)}",
            path=f"{path}.server",
            code="SERVER_NOT_ALLOWED",
            fix="name a server the operator listed in the journal's --allow file (or ask them to add it)",
        )
    if not isinstance(tool, str) or not _TOOL.fullmatch(tool):
        raise HatpError(RULE, f"tool {tool!r} is not a tool name", path=f"{path}.tool", code="BAD_UNDO", fix=fix)
    tools = allowed.get(server) if isinstance(allowed, Mapping) else None
    if tools is not None and tool not in tools:
        raise HatpError(
            RULE,
            f"tool {tool!r} of server {server!r} is not one the allow-list lets an undo call ({sorted(tools)})",
            path=f"{path}.tool",
            code="TOOL_NOT_ALLOWED",
            fix="register one of the undo tools the operator listed for that server",
        )
    if not isinstance(arguments, dict):
        raise HatpError(
            RULE, "the undo's arguments are a JSON object", path=f"{path}.arguments", code="BAD_UNDO", fix=fix
        )
    canonical(arguments)  # HATP-CANON-2: data the record can sign
    return UndoSpec(server, tool, dict(arguments))

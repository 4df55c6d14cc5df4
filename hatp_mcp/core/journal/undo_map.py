"""The journaling proxy's undo map: which upstream tool undoes which, with arguments taken by JSON pointer from the
call's arguments and result (HATP-JRN-14). Pure.

    {"tools": {
        "refund": {"undo": "reverse_refund", "arguments": {"item": "/args/item", "refund": "/result/refundId"}},
        "mark_returned": {"undo": "unmark_returned", "arguments": {"item": "/args/item"}},
        "ship": {"pivot": true}}}

A pointer (RFC 6901) is resolved against `{"args": <the call's arguments>, "result": <its structured result>}`;
a value that is not a pointer string is refused (a constant goes in `"constants"`). A tool the map does not name
is journaled as irreversible (rollback leaves it in place and says so, HATP-JRN-19).

The proxy runs on a policy file (hatp_mcp/core/model/proxy_policy.py); `UndoMap.policy` turns a map into one:
each pointer becomes the JMESPath expression that finds the same member, each constant a literal, a pivot an
irreversible tool, and the default `irreversible`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hatp_mcp.core.model.proxy_policy import HttpUpstream, ProxyPolicy, StdioUpstream, load_policy
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.errors import HatpError

__all__ = ["UndoMap", "UndoRule", "pointer_expression", "resolve_pointer"]

RULE = "HATP-JRN-14"
_TOOL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$")


@dataclass(frozen=True, slots=True)
class UndoRule:
    tool: str
    undo: str | None
    arguments: dict[str, str] = field(default_factory=dict)  # name -> pointer into {"args", "result"}
    constants: dict[str, Any] = field(default_factory=dict)
    pivot: bool = False

    def build(self, args: Mapping[str, Any], result: Any) -> dict[str, Any]:
        """The undo call's arguments. Raises HatpError HATP-JRN-14 (`POINTER_UNRESOLVED`) when a pointer finds
        nothing: the undo is never sent with an argument missing."""
        doc = {"args": dict(args), "result": result}
        out = dict(self.constants)
        for name, pointer in self.arguments.items():
            try:
                out[name] = resolve_pointer(doc, pointer)
            except (KeyError, IndexError, ValueError, TypeError) as exc:
                raise HatpError(
                    RULE,
                    f"the undo of {self.tool!r} needs {name!r} from {pointer}, which the call does not have ({exc})",
                    path=f"tools.{self.tool}.arguments.{name}",
                    code="POINTER_UNRESOLVED",
                    fix="point at a member the tool's arguments or structured result always hold",
                ) from exc
        return out


def resolve_pointer(doc: Any, pointer: str) -> Any:
    """RFC 6901. Raises KeyError / IndexError / ValueError / TypeError when it finds nothing."""
    if pointer == "":
        return doc
    if not pointer.startswith("/"):
        raise ValueError(f"{pointer!r} is not a JSON pointer")
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, dict):
            doc = doc[token]
        elif isinstance(doc, list):
            if not token.isdigit() or (token != "0" and token.startswith("0")):
                raise ValueError(f"{token!r} is not an array index")
            doc = doc[int(token)]
        else:
            raise TypeError(f"cannot step into {type(doc).__name__} with {token!r}")
    return doc


def pointer_expression(pointer: str) -> str:
    """The JMESPath expression that finds what an RFC 6901 pointer finds (`/args/items/0` -> `"args"."items"[0]`)."""
    parts: list[str] = []
    for raw in pointer[1:].split("/") if pointer else []:
        token = raw.replace("~1", "/").replace("~0", "~")
        if token.isdigit() and (token == "0" or not token.startswith("0")):
            parts.append(f"[{token}]")
        else:
            parts.append(("." if parts else "") + json.dumps(token))
    return "".join(parts) or "@"


def _literal(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False).replace("`", "\\`") + "`"


@dataclass(frozen=True, slots=True)
class UndoMap:
    rules: dict[str, UndoRule]

    def rule(self, tool: str) -> UndoRule:
        return self.rules.get(tool) or UndoRule(tool, None)

    def policy(self, upstream: StdioUpstream | HttpUpstream) -> ProxyPolicy:
        """The same proxy as a policy file. Raises HatpError HATP-PXY-1/3 (not for a map `parse` accepted)."""
        tools: dict[str, Any] = {}
        for name, r in self.rules.items():
            if r.undo is None:
                tools[name] = {"policy": "irreversible"}
                continue
            arguments = {k: _literal(v) for k, v in r.constants.items()}
            arguments.update({k: pointer_expression(p) for k, p in r.arguments.items()})
            tools[name] = {"policy": "journal", "undo": {"tool": r.undo, "arguments": arguments}}
        doc = {"upstream": upstream.wire(), "default": "irreversible", "tools": tools}
        return load_policy(doc, "the undo map")

    @classmethod
    def parse(cls, doc: object) -> UndoMap:
        """Raises HatpError HATP-JRN-14 (`BAD_UNDO_MAP`) naming the path and the fix."""

        def bad(path: str, reason: str) -> HatpError:
            fix = 'write the undo map as {"tools": {"<tool>": {"undo": "<tool>", "arguments": {}}}}'
            return HatpError(RULE, reason, path=path, code="BAD_UNDO_MAP", fix=fix)

        tools = doc.get("tools") if isinstance(doc, dict) else None
        if not isinstance(tools, dict):
            raise bad("tools", "an undo map is an object with a 'tools' object")
        rules: dict[str, UndoRule] = {}
        for name, entry in tools.items():
            at = f"tools.{name}"
            if not isinstance(entry, dict) or set(entry) - {"undo", "arguments", "constants", "pivot"}:
                raise bad(at, "an entry has only undo, arguments, constants and pivot")
            undo, pivot = entry.get("undo"), bool(entry.get("pivot", False))
            if undo is not None and (not isinstance(undo, str) or not _TOOL.fullmatch(undo)):
                raise bad(f"{at}.undo", f"{undo!r} is not a tool name (an undo is an upstream tool, never a command)")
            if pivot and undo is not None:
                raise bad(at, "a pivot cannot be undone: it names no undo")
            arguments = entry.get("arguments", {})
            if not isinstance(arguments, dict) or not all(
                isinstance(p, str) and (p.startswith("/args") or p.startswith("/result")) for p in arguments.values()
            ):
                raise bad(f"{at}.arguments", "each undo argument is a JSON pointer into /args/... or /result/...")
            constants = entry.get("constants", {})
            if not isinstance(constants, dict):
                raise bad(f"{at}.constants", "constants is a JSON object")
            canonical(constants)
            rules[str(name)] = UndoRule(str(name), undo, dict(arguments), dict(constants), pivot)
        return cls(rules)

"""The proxy's decision for each upstream tool, checked against the tools the upstream lists (spec/proxy.md), and
the undo and lookup arguments its expressions build. Pure: the binding lists the tools and makes the calls.

`resolve_tools(policy, upstream)` is run at start, before anything is served (and on a reload, HATP-PXY-42):
every tool, undo tool and lookup tool the file names exists upstream (HATP-PXY-4); each built argument fits the
undo (lookup) tool's `inputSchema` as far as an expression's shape can be known without running it: required
properties present, none the schema forbids, arrays where arrays go, objects with their required members
(HATP-PXY-5), the schema's local `$ref`s followed (HATP-PXY-45); a read-only tool is never journaled
(HATP-PXY-6). `build_arguments` evaluates the expressions at rollback; one that finds nothing refuses the undo
rather than send it with an argument missing (HATP-PXY-7).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from jmespath.exceptions import JMESPathError

from hatp_mcp.core.model.proxy_policy import (
    Gate,
    LookupCall,
    ParticipantOperation,
    Precondition,
    ProxyPolicy,
    UndoCall,
    compiled,
)
from hatp_mcp.errors import HatpError

__all__ = [
    "IRREVERSIBLE_NOTE",
    "ToolRule",
    "UpstreamTool",
    "build_arguments",
    "call_document",
    "expression_shape",
    "resolve_tools",
]

IRREVERSIBLE_NOTE = "This call cannot be undone: a saga rollback leaves its effect in place and says so (HATP-PXY-8)."


@dataclass(frozen=True, slots=True)
class UpstreamTool:
    """What the proxy needs of one tool the upstream lists."""

    name: str
    input_schema: Mapping[str, Any]
    read_only_hint: bool = False
    idempotent_hint: bool = False


@dataclass(frozen=True, slots=True)
class ToolRule:
    """The proxy's decision for one upstream tool: `action` is pass, journal, irreversible, gate, hide, deny or
    participant."""

    tool: str
    action: str
    undo: UndoCall | None = None
    lookup: LookupCall | None = None
    gate: Gate | None = None
    participant: ParticipantOperation | None = None


def resolve_tools(policy: ProxyPolicy, upstream: Sequence[UpstreamTool]) -> dict[str, ToolRule]:
    """Each upstream tool's rule. Raises HatpError HATP-PXY-4 (`UNKNOWN_TOOL`), HATP-PXY-5
    (`UNDO_ARGUMENTS_UNFIT`) or HATP-PXY-6 (`READ_ONLY_JOURNALED`), naming the file's path and the fix."""
    tools = {t.name: t for t in upstream}
    listed = ", ".join(sorted(tools)) or "none"
    for name, entry in policy.tools.items():
        at = f"tools.{name}"
        if name not in tools:
            raise HatpError(
                "HATP-PXY-4",
                f"the upstream has no tool {name!r} (it lists: {listed})",
                path=at,
                code="UNKNOWN_TOOL",
                fix="name a tool the upstream lists, or remove the entry",
            )
        read_only = entry.read_only or tools[name].read_only_hint
        if read_only and entry.policy in ("journal", "irreversible"):
            by = "the file marks it readOnly" if entry.read_only else "the upstream marks it readOnlyHint"
            raise HatpError(
                "HATP-PXY-6",
                f"{name!r} changes nothing ({by}), so it is never journaled: policy {entry.policy!r} is refused",
                path=f"{at}.policy",
                code="READ_ONLY_JOURNALED",
                fix='make it "pass" (or "hide" / "deny")',
            )
        for member, call in (("undo", entry.undo), ("lookup", entry.lookup)):
            if call is None:
                continue
            target = tools.get(call.tool)
            if target is None:
                raise HatpError(
                    "HATP-PXY-4",
                    f"the {member} of {name!r} calls {call.tool!r}, which the upstream does not have "
                    f"(it lists: {listed})",
                    path=f"{at}.{member}.tool",
                    code="UNKNOWN_TOOL",
                    fix=f"name an upstream tool as the {member}",
                )
            _fits(call.arguments, target, f"{at}.{member}.arguments")
        if entry.participant is not None:
            _participant_calls(entry.participant, tools, at, listed)
    out: dict[str, ToolRule] = {}
    for t in upstream:
        named = policy.tools.get(t.name)
        if named is not None:
            out[t.name] = ToolRule(t.name, named.policy, named.undo, named.lookup, named.gate, named.participant)
        elif t.read_only_hint and policy.default == "irreversible":
            out[t.name] = ToolRule(t.name, "pass")  # a read-only tool is never journaled (HATP-PXY-6)
        else:
            out[t.name] = ToolRule(t.name, policy.default)
    return out


def _participant_calls(op: ParticipantOperation, tools: Mapping[str, UpstreamTool], at: str, listed: str) -> None:
    """Raises HatpError HATP-PXY-31: a call of a participant entry names a tool the upstream lacks, or builds
    arguments that cannot fit that tool's inputSchema; HATP-PXY-65: it names no lookup for a commit the upstream
    does not mark idempotent."""
    calls: list[tuple[str, UndoCall | LookupCall | Precondition | None]] = [
        ("undo", op.undo),
        ("lookup", op.lookup),
        ("precondition", op.precondition),
        ("confirm", op.confirm),
        ("release", op.release),
    ]
    for member, call in calls:
        if call is None:
            continue
        target = tools.get(call.tool)
        path = f"{at}.participant.{member}"
        if target is None:
            raise HatpError(
                "HATP-PXY-31",
                f"the {member} of participant {at.split('.', 1)[1]!r} calls {call.tool!r}, which the upstream does "
                f"not have (it lists: {listed})",
                path=f"{path}.tool",
                code="UNKNOWN_TOOL",
                fix=f"name an upstream tool as the {member}",
            )
        try:
            _fits(call.arguments, target, f"{path}.arguments")
        except HatpError as exc:  # the same check as an undo's, under the participant's rule
            raise HatpError("HATP-PXY-31", exc.reason, path=exc.path, code=exc.code, fix=exc.fix) from None
    name = at.split(".", 1)[1]
    sent = op.confirm.tool if op.tier == "hold" and op.confirm is not None else name
    if op.lookup is None and not tools[sent].idempotent_hint:
        raise HatpError(
            "HATP-PXY-65",
            f"participant {name!r} names no lookup and the upstream does not mark {sent!r} idempotentHint: a commit "
            "cut off by a restart could be neither found nor sent again safely",
            path=f"{at}.participant.lookup",
            code="NO_LOOKUP",
            fix="name a lookup (a read tool and a JMESPath `happened` over its answer) that says whether the call "
            "with these args happened",
        )


def _fits(arguments: Mapping[str, str], tool: UpstreamTool, path: str) -> None:
    """Raises HatpError HATP-PXY-5 when the built object cannot fit the tool's inputSchema, HATP-PXY-45 when
    that schema has a `$ref` the check cannot follow."""
    shape: dict[str, Any] = {k: expression_shape(v) for k, v in arguments.items()}
    problem = _misfit(("object", shape), tool.input_schema, "", _Refs(tool.input_schema, tool.name, path))
    if problem is not None:
        where, why = problem
        raise HatpError(
            "HATP-PXY-5",
            f"the arguments built for {tool.name!r} do not fit its inputSchema: {why}",
            path=path + where,
            code="UNDO_ARGUMENTS_UNFIT",
            fix=f"build what {tool.name}'s inputSchema asks for (see its tools/list entry), e.g. rename with "
            "a multiselect hash: items[*].{wanted: given}",
        )


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def expression_shape(expression: str) -> Any:
    """What an expression yields, as far as its syntax tells: `("array", item)`, `("object", {key: shape})`, a JSON
    type name, or None (unknown until it runs)."""
    return _shape(compiled(expression).parsed)


def _shape(node: Mapping[str, Any]) -> Any:
    kind = node.get("type")
    children = node.get("children") or []
    if kind in ("projection", "value_projection", "filter_projection"):
        return ("array", _shape(children[1]))
    if kind in ("flatten", "multi_select_list"):
        return ("array", None)
    if kind == "multi_select_dict":
        return ("object", {pair["value"]: _shape(pair["children"][0]) for pair in children})
    if kind in ("subexpression", "pipe") and children:
        return _shape(children[-1])
    if kind == "literal":
        value = node.get("value")
        if isinstance(value, list):
            return ("array", None)
        if isinstance(value, dict):
            return ("object", {k: _JSON_TYPES.get(type(v)) for k, v in value.items()})
        return _JSON_TYPES.get(type(value))
    if kind in ("comparator", "not_expression"):
        return "boolean"
    return None


@dataclass(frozen=True, slots=True)
class _Refs:
    """What a `$ref` is resolved in: the whole inputSchema of `tool`, whose built arguments are at `path`."""

    root: Mapping[str, Any]
    tool: str
    path: str


MAX_REFS = 64  # references followed in a row before one schema: a longer chain is taken as a loop


def _unfollowed(refs: _Refs, where: str, why: str) -> HatpError:
    return HatpError(
        "HATP-PXY-45",
        f"the inputSchema of {refs.tool!r} has a $ref the proxy does not follow: {why}",
        path=refs.path + where,
        code="SCHEMA_REF_UNFOLLOWED",
        fix="call an undo tool whose inputSchema refers only within itself (#/$defs/..., #/definitions/...) and "
        f"not in a loop, or ask {refs.tool}'s server to inline it",
    )


def _deref(schema: Mapping[str, Any], refs: _Refs, where: str) -> Mapping[str, Any]:
    """`schema` with its `$ref` followed (HATP-PXY-45): a local JSON pointer into the same inputSchema
    (`#/$defs/Name`, `#/definitions/Name`, `#`), chains included, the members beside a `$ref` kept. A recursive
    schema is fine: the walk goes only as deep as the built shape, which is finite. Raises HatpError HATP-PXY-45
    for a remote reference, one that points at nothing, or references that lead only to each other."""
    seen: list[str] = []
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
        ref: str = schema["$ref"]
        if not ref.startswith("#"):
            raise _unfollowed(refs, where, f"{ref!r} is not a reference within the schema (#/...): it is never fetched")
        if ref in seen or len(seen) >= MAX_REFS:
            raise _unfollowed(refs, where, f"the references {' -> '.join([*seen, ref])} lead only to each other")
        seen.append(ref)
        target: Any = refs.root
        for token in [t for t in ref[1:].split("/") if t != ""]:
            key = unquote(token).replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and key in target:
                target = target[key]
            elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                target = target[int(key)]
            else:
                target = None
                break
        if not isinstance(target, Mapping):
            raise _unfollowed(refs, where, f"{ref!r} points at nothing in the schema")
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **siblings} if siblings else target
    return schema


def _misfit(shape: Any, schema: Mapping[str, Any], where: str, refs: _Refs) -> tuple[str, str] | None:
    """Why a value of `shape` cannot be valid against `schema` (a part of the inputSchema its references point
    into), or None (it may be). Raises HatpError HATP-PXY-45 for a reference it cannot follow."""
    if shape is None or not isinstance(schema, Mapping):
        return None
    schema = _deref(schema, refs, where)
    kind = shape[0] if isinstance(shape, tuple) else shape
    allowed = schema.get("type")
    types = {allowed} if isinstance(allowed, str) else set(allowed) if isinstance(allowed, list) else None
    if types is not None and kind not in types and not (kind == "integer" and "number" in types):
        return where, f"{where.lstrip('.') or 'the arguments'} is built as {kind}, the schema asks for {allowed}"
    if kind == "array" and isinstance(shape, tuple):
        return _misfit(shape[1], schema.get("items") or {}, f"{where}[*]", refs)
    if kind == "object" and isinstance(shape, tuple):
        members: Mapping[str, Any] = shape[1]
        missing = [r for r in schema.get("required") or [] if r not in members]
        if missing:
            return where, f"{where.lstrip('.') or 'the arguments'} lacks required {', '.join(map(repr, missing))}"
        props = schema.get("properties") or {}
        if schema.get("additionalProperties") is False:
            extra = [k for k in members if k not in props]
            if extra:
                return f"{where}.{extra[0]}", f"{extra[0]!r} is not a property the schema allows"
        for key, sub in members.items():
            problem = _misfit(sub, props.get(key) or {}, f"{where}.{key}", refs)
            if problem is not None:
                return problem
    return None


def call_document(args: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """What the expressions read: `{"args": <the call's arguments>, "result": <its result>}`."""
    return {"args": dict(args), "result": result}


def build_arguments(arguments: Mapping[str, str], doc: Mapping[str, Any], *, what: str, path: str) -> dict[str, Any]:
    """Evaluate each expression over `doc`. Raises HatpError HATP-PXY-7 (`ARGUMENT_NOT_FOUND`) when one yields
    null: the call is never sent with an argument missing."""
    out: dict[str, Any] = {}
    for name, expression in arguments.items():
        try:
            value = compiled(expression).search(dict(doc))
        except JMESPathError:  # a function given the wrong type (contains(null, ...)): it found nothing usable
            value = None
        if value is None:
            raise HatpError(
                "HATP-PXY-7",
                f"{what}: {expression!r} found nothing in the call's "
                f"{'arguments and result' if 'result' in doc else 'arguments'}: it is not sent short of one",
                path=f"{path}.{name}",
                code="ARGUMENT_NOT_FOUND",
                fix="write an expression over what the call's arguments or result always hold",
            )
        out[name] = value
    return out

"""The proxy's policy file: which upstream MCP server it fronts, the environment that server gets, and what the
proxy does with each of its tools (spec/proxy.md). Pure: no IO; reading the file, the environment and secret files
is the binding's (hatp_mcp/mcp/proxy_upstream.py).

    {"upstream": {"command": "node", "args": ["server-memory/dist/index.js"],
                  "env": {"MEMORY_FILE_PATH": "/srv/memory.jsonl", "API_KEY": {"file": "/srv/key"}}},
     "default": "deny",
     "tools": {
       "read_graph": {"policy": "pass"},
       "create_entities": {"policy": "journal",
                           "undo": {"tool": "delete_entities",
                                    "arguments": {"entityNames": "result.entities[*].name"}}},
       "write_file": {"policy": "irreversible"}}}

A tool with policy `participant` is reached only through `hatp/txn/*` (spec/proxy.md section 3): the top-level
`participant` names the URI the proxy answers as, and the tool's own `participant` its tier and calls:

    "participant": {"uri": "mcp://memory.example/hatp"},
    "tools": {"create_entities": {"policy": "participant", "participant": {
                "tier": "compensate",
                "undo": {"tool": "delete_entities", "arguments": {"entityNames": "args.entities[*].name"}},
                "precondition": {"tool": "open_nodes", "arguments": {"names": "args.entities[*].name"}}}}}

Each undo (and lookup) argument is a JMESPath expression over `{"args": <the call's arguments>, "result": <its
structured result, or its text parsed as JSON>}`, compiled when the file is read: data for a library made to
select and reshape JSON, never code (HATP-PXY-3). `load_policy` turns a parsed document into a ProxyPolicy or one
HatpError naming the rule, the JSON path and the fix.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any, Literal

import jmespath
from jmespath.exceptions import JMESPathError
from pydantic import AfterValidator, Field, ValidationError, WithJsonSchema
from pydantic_core import PydanticCustomError

from hatp_mcp.core.model.amount import Currency
from hatp_mcp.core.model.base import DecimalStr, WireModel
from hatp_mcp.core.model.wire import error_path, explain
from hatp_mcp.errors import HatpError

__all__ = [
    "APPROVER_PLACEHOLDER",
    "DEFAULT_POLICIES",
    "MAX_EXPRESSION",
    "POLICIES",
    "Budget",
    "EnvFromEnv",
    "EnvFromFile",
    "EnvValue",
    "Expression",
    "Gate",
    "HttpUpstream",
    "LookupCall",
    "ParticipantIdentity",
    "ParticipantOperation",
    "Precondition",
    "ProxyPolicy",
    "StdioUpstream",
    "ToolPolicy",
    "UndoCall",
    "compiled",
    "load_policy",
]

POLICIES = ("pass", "journal", "irreversible", "gate", "hide", "deny", "participant")
DEFAULT_POLICIES = ("pass", "irreversible", "hide", "deny")  # journal needs an undo, which only a named tool has
_EXPRESSION_ERROR = "hatp_proxy_expression"
# What `hatp proxy init` writes as a gate's approver where it knows none (HATP-PXY-71): in the `.invalid` domain,
# which names nobody (RFC 2606), so a file still holding it is refused instead of gating to no one.
APPROVER_PLACEHOLDER = "human://approver.invalid/SET-THE-APPROVER"
_UNSET_APPROVER = re.compile(r"^human://[^/?#]*\.invalid(?:[:/?#]|$)", re.IGNORECASE)
MAX_EXPRESSION = 1000
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_TOOL_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,127}$"


@lru_cache(maxsize=1024)
def compiled(expression: str) -> Any:
    """The compiled JMESPath expression (remembered: a policy's few expressions run on every call and undo).
    Raises jmespath's ParseError (a ValueError) for one that does not parse."""
    return jmespath.compile(expression)


def _check_expression(value: str) -> str:
    if len(value) > MAX_EXPRESSION:
        raise PydanticCustomError(
            _EXPRESSION_ERROR,
            "an expression of {n} characters is longer than the {limit} an undo argument needs",
            {"n": len(value), "limit": MAX_EXPRESSION},
        )
    try:
        compiled(value)
    except RecursionError:  # the parser recurses per nesting level: a hostile file must not crash the proxy
        raise PydanticCustomError(_EXPRESSION_ERROR, "the expression nests too deep to compile") from None
    except (JMESPathError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PydanticCustomError(
            _EXPRESSION_ERROR,
            "'{expression}' is not a JMESPath expression ({why})",
            {"expression": value, "why": first},
        ) from None
    return value


Expression = Annotated[
    str,
    AfterValidator(_check_expression),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "description": 'A JMESPath expression over {"args": ..., "result": ...}, e.g. result.entities[*].name; '
            'a constant is a literal, e.g. `"soft"`.',
        }
    ),
]
ToolName = Annotated[str, Field(pattern=_TOOL_NAME)]
EnvName = Annotated[str, Field(pattern=_ENV_NAME)]


class EnvFromEnv(WireModel):
    """`{"env": NAME}`: the value of the proxy's own variable NAME, passed on under the name the file gives it."""

    env: EnvName


class EnvFromFile(WireModel):
    """`{"file": PATH}`: the content of a file readable by its owner only (mode 0600 or stricter), trailing newline
    removed: where a secret lives."""

    file: str = Field(min_length=1, max_length=4096)


EnvValue = str | EnvFromEnv | EnvFromFile


class StdioUpstream(WireModel):
    """A server the proxy starts over stdio. It gets exactly `env` beside the MCP SDK's minimal default (PATH,
    HOME, USER, ...): nothing else of the proxy's environment (HATP-PXY-2). `cwd`, and a relative secret file,
    are taken from the policy file's folder, which is also the default `cwd`."""

    command: str = Field(min_length=1, max_length=4096)
    args: list[str] = Field(default_factory=list)
    env: dict[EnvName, EnvValue] = Field(default_factory=dict)
    cwd: str | None = Field(default=None, min_length=1, max_length=4096)


HeaderName = Annotated[str, Field(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")]


class HttpUpstream(WireModel):
    """A server the proxy reaches over streamable HTTP, sent `headers` on every request (an `Authorization`
    token, say): each value literal, `{"env": NAME}` or `{"file": PATH}` as a stdio server's environment is, and
    never logged (HATP-PXY-46)."""

    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=4096)
    headers: dict[HeaderName, EnvValue] = Field(default_factory=dict, max_length=64)


class UndoCall(WireModel):
    """The upstream call that undoes a journaled one: a tool, and each argument as an expression."""

    tool: ToolName
    arguments: dict[str, Expression] = Field(default_factory=dict)


class LookupCall(WireModel):
    """How to tell whether a call whose answer was lost happened: an upstream (read) tool called with `arguments`
    (expressions over `{"args"}`), and `happened`, an expression over `{"args", "result": <the lookup's result>}`
    that is true when it did, false when it did not (null: cannot tell, a dead letter)."""

    tool: ToolName
    arguments: dict[str, Expression] = Field(default_factory=dict)
    happened: Expression


class Gate(WireModel):
    """A gated tool's requirement (spec/proxy.md HATP-PXY-20..): the people at `address` (a `human://` address)
    approve exactly each call, for `action` (what their cards' authority must cover); `amount` is a JMESPath
    expression over `{"args": <the call's arguments>}` finding the call's amount (a number or a decimal string)
    in `currency`; a call above `max` is refused before anyone is asked, and so is one a budget cannot cover."""

    address: str = Field(pattern=r"^human://[^\s]+$", max_length=500)
    action: str = Field(min_length=1, max_length=200)
    amount: Expression | None = None
    currency: Currency | None = None
    max: DecimalStr | None = None


class Budget(WireModel):
    """A spend limit per agent: the gated calls in `currency` that the proxy sent upstream for one agent within the
    last `windowSeconds` add up to at most `limit` (HATP-PXY-23)."""

    currency: Currency
    limit: DecimalStr
    window_seconds: int = Field(ge=1, le=366 * 24 * 3600)


class Precondition(WireModel):
    """What a participant's prepare reads and signs (HATP-PXY-34): the upstream (read) tool called with `arguments`
    (expressions over `{"args"}`); `version`, an expression over `{"args", "result": <the read's result>}`,
    selects what must not change before the commit (all of the result unless given)."""

    tool: ToolName
    arguments: dict[str, Expression] = Field(default_factory=dict)
    version: Expression = "result"


class ParticipantOperation(WireModel):
    """A participant tool's transaction (HATP-PXY-30): its `tier`; `operation`, the name plans give it (the tool's
    name unless given). `compensate`: commit is the call, `undo` the call that compensates it. `final`: commit is
    the call. `hold`: prepare is the call (the upstream's own hold tool), `confirm` the commit and `release` the
    abort, each built over `{"args", "result": <the hold's result>}`. Not for `hold`: `lookup`, how to tell
    whether a commit whose answer was lost happened (HATP-PXY-39), and `precondition`, what prepare reads and
    signs (HATP-PXY-34)."""

    tier: Literal["compensate", "final", "hold"]
    operation: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,199}$")
    undo: UndoCall | None = None
    lookup: LookupCall | None = None
    precondition: Precondition | None = None
    confirm: UndoCall | None = None
    release: UndoCall | None = None


class ParticipantIdentity(WireModel):
    """Who the proxy is as a HATP participant: the `uri` plans name it by (branch `participant`, the votes'
    `voter`), and the longest one upstream call takes, as it states in hatp/txn/estimate (HATP-MODE-9)."""

    uri: str = Field(pattern=r"^[a-z][a-z0-9+.-]*://[^\s]+$", max_length=500)
    max_call_seconds: int = Field(default=30, ge=1, le=3600)


class ToolPolicy(WireModel):
    """What the proxy does with one tool. `undo` (and `lookup`) only with `journal`, `gate` only with policy
    `gate`, `participant` only with policy `participant`; `readOnly: true` says the tool changes nothing, so it is
    never journaled (as a `readOnlyHint` from the upstream does)."""

    policy: Literal["pass", "journal", "irreversible", "gate", "hide", "deny", "participant"]
    undo: UndoCall | None = None
    lookup: LookupCall | None = None
    gate: Gate | None = None
    participant: ParticipantOperation | None = None
    read_only: bool | None = None


class ProxyPolicy(WireModel):
    """The proxy's file: its upstream, the policy of each tool it names, and `default` for every other tool;
    `participant`: who the proxy is for the tools it makes a transaction's participant (HATP-PXY-30).
    `shadow: true` records what the hide, deny and gate policies and the budgets would refuse instead of
    enforcing it (HATP-PXY-40)."""

    upstream: StdioUpstream | HttpUpstream
    participant: ParticipantIdentity | None = None
    default: Literal["pass", "irreversible", "hide", "deny"] = "deny"
    tools: dict[ToolName, ToolPolicy] = Field(default_factory=dict)
    budgets: list[Budget] = Field(default_factory=list, max_length=20)
    shadow: bool = False


def load_policy(doc: object, source: str = "the policy file") -> ProxyPolicy:
    """A parsed policy document as a ProxyPolicy. Raises HatpError: HATP-PXY-1 (`BAD_POLICY`: not of the schema,
    or a journal entry without an undo, an undo on another policy), HATP-PXY-3 (`BAD_EXPRESSION`)."""
    try:
        policy = ProxyPolicy.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors()
        bad = next((e for e in errors if e["type"] == _EXPRESSION_ERROR), None)
        if bad is not None:
            raise HatpError(
                "HATP-PXY-3",
                f"{source}: {bad['msg']}",
                path=_path(bad["loc"]),
                code="BAD_EXPRESSION",
                fix='write a JMESPath expression (jmespath.org) over {"args": ..., "result": ...}, '
                'e.g. args.entities[*].name; a constant as a literal: `"text"`',
            ) from None
        first = dict(_most_specific(errors))
        first["loc"] = tuple(p for p in first["loc"] if p not in _UNION_TAGS)
        raise HatpError(
            "HATP-PXY-1",
            f"{source}: {explain(first, ProxyPolicy)}",
            path=_path(first["loc"]),
            code="BAD_POLICY",
            fix="make the member at this path fit the policy file's schema (hatp schemas --write DIR: proxy-policy)",
        ) from None
    for name, tool in policy.tools.items():
        at = f"tools.{name}"
        if tool.policy == "journal" and tool.undo is None:
            raise HatpError(
                "HATP-PXY-1",
                f"{source}: {name!r} is journaled but names no undo: rollback could not undo it",
                path=f"{at}.undo",
                code="BAD_POLICY",
                fix='add "undo": {"tool": ..., "arguments": {...}}, or make it "irreversible" (never undone) or "pass"',
            )
        if (tool.policy == "gate") != (tool.gate is not None):
            raise HatpError(
                "HATP-PXY-20",
                f"{source}: {name!r} has policy {tool.policy!r}"
                + (" but names no gate" if tool.gate is None else ", which takes no gate"),
                path=f"{at}.gate",
                code="BAD_POLICY",
                fix='give policy "gate" with "gate": {"address": "human://...", "action": ...}, or remove gate',
            )
        gate = tool.gate
        if gate is not None and (gate.amount is None) != (gate.currency is None):
            raise HatpError(
                "HATP-PXY-20",
                f"{source}: the gate of {name!r} names an amount without a currency, or a currency without an amount",
                path=f"{at}.gate",
                code="BAD_POLICY",
                fix='give both "amount" (a JMESPath expression over {"args": ...}) and "currency", or neither',
            )
        if gate is not None and _UNSET_APPROVER.match(gate.address):
            raise HatpError(
                "HATP-PXY-71",
                f"{source}: the gate of {name!r} names no approver yet ({gate.address}): nobody could approve a call",
                path=f"{at}.gate.address",
                code="APPROVER_UNSET",
                fix="set it to who approves the calls, a person (human://ORG/NAME) or a role (human://ORG/role/ROLE) "
                "of the organisation the proxy is given with --org; or give the tool another policy",
            )
        if gate is not None and gate.max is not None and gate.amount is None:
            raise HatpError(
                "HATP-PXY-20",
                f"{source}: the gate of {name!r} has a max but no amount to compare it with",
                path=f"{at}.gate.max",
                code="BAD_POLICY",
                fix='add "amount" and "currency", or remove "max"',
            )
        if tool.policy != "journal" and (tool.undo is not None or tool.lookup is not None):
            member = "undo" if tool.undo is not None else "lookup"
            raise HatpError(
                "HATP-PXY-1",
                f"{source}: {name!r} has policy {tool.policy!r}, which is never undone or looked up",
                path=f"{at}.{member}",
                code="BAD_POLICY",
                fix=f'remove {member}, or make the policy "journal"',
            )
    _check_participants(policy, source)
    return policy


def _participant_refusal(source: str, reason: str, path: str, fix: str) -> HatpError:
    return HatpError("HATP-PXY-30", f"{source}: {reason}", path=path, code="BAD_POLICY", fix=fix)


def _check_participants(policy: ProxyPolicy, source: str) -> None:
    """Raises HatpError HATP-PXY-30 for a participant entry whose members do not fit its tier or policy."""
    names: dict[str, str] = {}
    for name, tool in policy.tools.items():
        at = f"tools.{name}"
        op = tool.participant
        if (tool.policy == "participant") != (op is not None):
            reason = "names no participant" if op is None else "takes no participant"
            raise _participant_refusal(
                source,
                f"{name!r} has policy {tool.policy!r} but {reason}",
                f"{at}.participant",
                'give policy "participant" with "participant": {"tier": ...}, or remove participant',
            )
        if op is None:
            continue
        if policy.participant is None:
            raise _participant_refusal(
                source,
                f"{name!r} is a participant tool, and the file names no participant URI",
                "participant",
                'add "participant": {"uri": "mcp://your-server.example/hatp"}: the URI plans name the proxy by',
            )
        wanted = {"compensate": {"undo"}, "final": set(), "hold": {"confirm", "release"}}[op.tier]
        # a hold's commit is its confirm: what it holds does not change, so it reads no precondition
        allowed = wanted | ({"lookup", "precondition"} if op.tier != "hold" else set())
        given = {m for m in ("undo", "lookup", "precondition", "confirm", "release") if getattr(op, m) is not None}
        for member in sorted(wanted - given):
            raise _participant_refusal(
                source,
                f"the {op.tier}-tier participant {name!r} names no {member}",
                f"{at}.participant.{member}",
                f'add "{member}": {{"tool": ..., "arguments": {{...}}}}, or choose another tier',
            )
        for member in sorted(given - allowed):
            raise _participant_refusal(
                source,
                f"the {op.tier}-tier participant {name!r} takes no {member}",
                f"{at}.participant.{member}",
                f"remove {member}, or choose the tier it belongs to (undo: compensate; confirm, release: hold)",
            )
        operation = op.operation or name
        if operation in names:
            raise _participant_refusal(
                source,
                f"{name!r} and {names[operation]!r} are both operation {operation!r}",
                f"{at}.participant.operation",
                "give each participant tool an operation name of its own",
            )
        names[operation] = name


# pydantic names the union member it tried in an error's location; the file has no such member
_UNION_TAGS = frozenset({"StdioUpstream", "HttpUpstream", "EnvFromEnv", "EnvFromFile", "str"})


def _path(loc: Any) -> str:
    return error_path(tuple(p for p in loc if p not in _UNION_TAGS))


def _most_specific(errors: list[Any]) -> Any:
    """Of a union's errors (the upstream is one of two shapes), the one that reached deepest: the likeliest typo."""
    return max(errors, key=lambda e: len(e["loc"]))

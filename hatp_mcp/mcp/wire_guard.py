"""The MCP wire's own limits: every message a server receives meets HATP-OBJ-1/2 before the SDK parses it.

A file given to `hatp` is refused when it is larger than 8 MiB, nested deeper than 64 levels, not UTF-8, holds a
duplicate member name, NaN or Infinity, or a string that is not Unicode text (a lone surrogate). The same limits
hold on the MCP wire (HATP-WIRE-1): checked on the raw bytes of each JSON-RPC message, the params counted like a
document (the message's own object around them is not a level of theirs), before the SDK sees it. A message that
fails is answered at once with a JSON-RPC error naming the rule (HATP-WIRE-2) and never reaches a handler: the
SDK would otherwise parse it differently from a file (duplicates: last wins; 1e400: infinity) or, over stdio,
drop it unanswered and leave the client waiting for its timeout.

- stdio: `screen_line(raw, answer)` screens each line's bytes before the SDK's stdio transport decodes it
  (hatp_mcp/mcp/stdio_pipes.py); a refused request's error is written to the same pipe, between whole lines.
- streamable HTTP: `GuardedApp(app)` wraps the Starlette app; a refused POST is answered 400 with the error.

Most messages are the compact JSON an SDK writes: `_fast_load` parses those with orjson and takes the value only
when orjson prints it back as exactly the same bytes, which proves there was nothing the strict parser would
refuse or read differently (a duplicate member prints once, so the bytes differ; NaN, infinities, a lone surrogate,
a byte-order mark or bad UTF-8 make orjson fail; a number printed back the same is a finite double or a 64-bit
integer, read alike by both). Anything else (spacing, escapes written otherwise, any doubt) goes to the strict
parser, `load_json`, which alone ever refuses: the verdicts are the same (tests/mcp/test_wire_guard.py checks the
fast path against it).

A refused message's id is found by a bounded scan of its own object that skips nested values however deep
(`_own_members`, HATP-WIRE-3), so a message refused for its depth is answered with its id. One whose id cannot be
read that way (it is not JSON, or not an object) is answered with id null, as
JSON-RPC 2.0 section 5.1 says; a refused notification (an object without an id) is not answered, as JSON-RPC
says of every notification. This module knows no HATP method.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from hatp_mcp.core.model.wire import MAX_BYTES, MAX_DEPTH, WireError, deeper_than, load_json

__all__ = ["GuardedApp", "check", "screen_line"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
# What a JSON-RPC envelope may add around an 8 MiB params document (method name, id, _meta, spacing).
ENVELOPE_BYTES = 64 * 1024
_MAY_HOLD_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
# An `"id"` member of the message's own object among the members before anything nested opens (outside a string
# nothing may be `{` or `[`, so the key is at the top level), with a number or string value: how an oversized
# message's id is read without parsing it. Linear: the two alternatives never start with the same byte.
_LEADING_ID = re.compile(rb'\s*\{(?:[^{}\[\]"]|"(?:[^"\\]|\\.)*")*?"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")')
_LEADING_BYTES = 4096
# HATP-WIRE-3: the tokens of a message's own object, read without parsing it: a string, a run of opening brackets,
# a run of closing ones, a scalar, a separator. Runs make a value nested N deep two tokens, however deep.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]+|[\]}]+|[^\s"\[\]{},:]+|[,:]')
_SCAN_TOKENS = 1_000_000  # a quarter of the tokens an 8 MiB message can hold


def _error(msg_id: object, code: int, rule: str, reason: str, fix: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "error": {"code": code, "message": f"{rule}: {reason}", "data": {"rule": rule, "reason": reason, "fix": fix}},
    }


def _lone_surrogate(value: Any) -> str | None:
    """The JSON path of the first string (member name or value) that is not Unicode text, or None."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        v, path = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return path
        elif isinstance(v, dict):
            for k, c in v.items():
                try:
                    k.encode("utf-8")
                except UnicodeEncodeError:
                    return path
                stack.append((c, f"{path}.{k}"))
        elif isinstance(v, list):
            stack.extend((c, f"{path}[{i}]") for i, c in enumerate(v))
    return None


def _own_members(raw: bytes) -> dict[str, bytes] | None:
    """HATP-WIRE-3: the members of the message's own object, name (its JSON string read) to its value's raw
    token when that value is a string or scalar, else to b"" (an object or array, skipped however deep by counting
    brackets outside strings). Read without parsing, in at most _SCAN_TOKENS tokens; None when the message is not
    one object the scan can follow. It decides nothing: a message it reads may still be refused (that is why it is
    asked), and a member's first writing counts."""
    members: dict[str, bytes] = {}
    depth, name, expect = 0, "", "open"
    for n, found in enumerate(_TOKEN.finditer(raw)):
        if n >= _SCAN_TOKENS:
            return None
        token = found.group()
        first = token[:1]
        if expect == "open":  # the message's own `{`, alone
            if token != b"{":
                return None
            depth, expect = 1, "name"
        elif depth > 1:  # inside a nested value: only brackets count
            if first in b"[{":
                depth += len(token)
            elif first in b"]}":
                depth -= len(token)
                if depth == 0:  # the run closed the message's own object too
                    return members
                if depth < 0:
                    return None
        elif expect == "name":
            if first == b'"':
                try:
                    name, expect = json.loads(token), "colon"
                except ValueError:
                    return None
            elif token == b"}":
                return members
            elif token != b",":
                return None
        elif expect == "colon":
            if token != b":":
                return None
            expect = "value"
        elif expect == "value":
            if first in b"[{":
                members.setdefault(name, b"")
                depth += len(token)
            elif first in b"]}" or token in (b",", b":"):
                return None
            else:
                members.setdefault(name, token)
            expect = "name"
    return None  # the object never closed


def _id_of(raw: bytes) -> object:
    """The message's id when its own object can be scanned (HATP-WIRE-3: duplicates, depth and numbers aside),
    else None."""
    members = _own_members(raw)
    token = members.get("id", b"") if members is not None else b""
    if not token:
        return None
    try:
        got = json.loads(token)
    except ValueError:
        return None
    return got if isinstance(got, str | int) and not isinstance(got, bool) else None


def _leading_id(raw: bytes) -> object:
    """The id of a message too large to parse, when it is among the members before its first nested value (within
    the first _LEADING_BYTES), else None: the sender can then match the refusal to its request."""
    found = _LEADING_ID.match(raw[:_LEADING_BYTES])
    if found is None:
        return None
    try:
        got = json.loads(found.group(1))
    except ValueError:
        return None
    return got if isinstance(got, str | int) and not isinstance(got, bool) else None


def _is_notification(raw: bytes) -> bool:
    """An object with a `method` and no `id` (HATP-WIRE-3: read by the same scan, however deep its params)."""
    members = _own_members(raw)
    return members is not None and "method" in members and "id" not in members


def _too_large(size: int, head: bytes) -> dict[str, Any]:
    """HATP-OBJ-2 for a message of `size` bytes whose first bytes are `head`: never parsed; its id read from
    `head` when it leads the message."""
    return _error(
        _leading_id(head),
        INVALID_REQUEST,
        "HATP-OBJ-2",
        f"the message is {size} bytes, more than the {MAX_BYTES}-byte limit on a document (plus "
        f"{ENVELOPE_BYTES} for the JSON-RPC envelope)",
        "send a smaller document",
    )


def _fast_load(raw: bytes) -> Any:
    """The message's value when orjson reads it and prints back exactly `raw` within the depth limit (see the
    module docstring), else None: then only the strict parser decides."""
    try:
        value = orjson.loads(raw)
        if orjson.dumps(value) != raw:
            return None
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, TypeError):
        return None
    if value is None:
        return None
    # The message's own object is not a level of its params (load_json's envelope=1). Each level opens with its own
    # bracket, so a message with no more brackets than levels allowed (counted in strings too) is within them.
    brackets = raw.count(b"{") + raw.count(b"[")
    if brackets > MAX_DEPTH + 1 and isinstance(value, dict | list) and deeper_than(value, MAX_DEPTH + 1):
        return None
    return value


def _load(raw: bytes) -> Any:
    """The message's value. Raises WireError as load_json does (the strict parser decides every refusal)."""
    value = _fast_load(raw) if len(raw) <= MAX_BYTES else None
    return value if value is not None else load_json(raw, "the message", envelope=1)


def check(raw: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error for a message that breaks HATP-OBJ-1/2 or is not one JSON-RPC object with object
    params, or None when it is within the limits."""
    if len(raw) > MAX_BYTES + ENVELOPE_BYTES:
        return _too_large(len(raw), raw)
    try:
        value = _load(raw)
    except WireError as exc:
        code = PARSE_ERROR if exc.rule == "HATP-OBJ-1" else INVALID_REQUEST
        return _error(_id_of(raw), code, exc.rule, exc.reason, exc.fix or "send one UTF-8 JSON object per message")
    if not isinstance(value, dict):
        return _error(
            None,
            INVALID_REQUEST,
            "HATP-WIRE-1",
            f"a JSON-RPC message is one object; this is a JSON {type(value).__name__}",
            'send {"jsonrpc": "2.0", "id": ..., "method": ..., "params": {...}}',
        )
    msg_id = value.get("id")
    msg_id = msg_id if isinstance(msg_id, str | int) and not isinstance(msg_id, bool) else None
    if "params" in value and not isinstance(value["params"], dict):
        return _error(
            msg_id,
            INVALID_PARAMS,
            "HATP-WIRE-1",
            f"params is a JSON {type(value['params']).__name__}; MCP params are one object",
            "send params as an object, or leave them out",
        )
    if _MAY_HOLD_SURROGATE.search(raw):
        where = _lone_surrogate(value)
        if where is not None:
            return _error(
                msg_id,
                PARSE_ERROR,
                "HATP-OBJ-1",
                f"the string at {where} holds a lone surrogate, which is not Unicode text",
                "send the character itself, or a surrogate pair",
            )
    return None


Answer = Callable[[str], Awaitable[None]]


async def screen_line(raw: bytes, answer: Answer) -> bool:
    """True when a line read from the stdio wire may go on to the SDK. Otherwise the line is dropped and, unless
    it is a notification, `answer` gets the JSON-RPC error as one line of text. Blank lines pass (the SDK skips
    them)."""
    body = raw.strip()
    if not body:
        return True
    verdict = check(body)
    if verdict is None:
        return True
    if not _is_notification(body):
        await answer(json.dumps(verdict, separators=(",", ":")) + "\n")
    return False


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class GuardedApp:
    """An ASGI app that checks each POSTed message before the wrapped (the SDK's) app sees it."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        body, more, too_big, size = bytearray(), True, False, 0
        while more:
            event = await receive()
            if event["type"] == "http.disconnect":
                return
            chunk = event.get("body", b"")
            size += len(chunk)
            if len(body) + len(chunk) > MAX_BYTES + ENVELOPE_BYTES:
                too_big = True  # keep reading (and dropping) so the client can read the answer
            else:
                body.extend(chunk)
            more = event.get("more_body", False)
        raw = bytes(body)
        verdict = _too_large(size, raw) if too_big else check(raw)
        if verdict is not None:
            answer = verdict if not _is_notification(raw) else None
            await _respond(send, answer)
            return
        delivered = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self._app(scope, replay, send)


async def _respond(send: Send, answer: dict[str, Any] | None) -> None:
    if answer is None:  # a refused notification: accepted at the HTTP level, never acted on
        await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})
        return
    body = json.dumps(answer, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})

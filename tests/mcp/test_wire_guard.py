"""hatp_mcp/mcp/wire_guard.py: the file limits hold on the MCP wire, and every malformed request is answered."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from typing import Any

import anyio
import httpx2
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.model.wire import MAX_BYTES, MAX_DEPTH, WireError, load_json
from hatp_mcp.mcp import wire_guard
from hatp_mcp.mcp.launch import ROOT, launch_http
from hatp_mcp.mcp.wire_guard import check, screen_line
from tests.fuzz.strategies import TRIP, hostile_json, mutated


def _request(params: Any, msg_id: object = 7, method: str = "hatp/directory/resolve") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}).encode()


def _nested(levels: int) -> Any:
    value: Any = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def _refused(raw: bytes) -> tuple[object, int, str]:
    verdict = check(raw)
    assert verdict is not None, raw[:80]
    return verdict["id"], verdict["error"]["code"], verdict["error"]["data"]["rule"]


def _typed(value: Any) -> Any:
    """`value` with every leaf tagged by its type: 1 and 1.0 and True compare unequal here."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


_BENDS = (
    (b"", b""),
    (b'{"jsonrpc":"2.0",', b'{"jsonrpc":"2.0","jsonrpc":"2.0",'),  # a duplicate member, compact
    (b'"id":1', b'"id":1,"id":2'),
    (b":1", b":NaN"),
    (b":1", b":1e400"),
    (b":1", b":123456789012345678901234567890"),  # beyond 64 bits: orjson reads a float, json an int
    (b":1", b":-0"),
    (b":1", b":1.0e0"),
    (b":1", b":18446744073709551615"),
    (b'"seat"', b'"\\ud800"'),
    (b'"seat"', b'"\\ud83d\\ude00"'),
    (b'"seat"', b'"\\u0041"'),
    (b'"seat"', b'"\\/"'),
    (b'"2.0"', b'"2.0\\u007f"'),
    (b",", b", "),
    (b"{", b"\xef\xbb\xbf{"),
    (b'"seat"', b'"\xff"'),
)


@st.composite
def _compact_messages(draw: st.DrawFn) -> bytes:
    """Messages in the compact form an SDK writes (what the fast path reads), then bent where the strict parser
    refuses or reads otherwise: duplicates, NaN, overflow, integers past 64 bits, -0, escapes, spacing, a BOM, bad
    UTF-8, depth around the limit."""
    params = draw(mutated(TRIP) | hostile_json)
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "hatp/txn/prepare", "params": params}
    try:
        raw = orjson.dumps(envelope)
    except (orjson.JSONEncodeError, TypeError):
        raw = json.dumps(envelope, separators=(",", ":"), allow_nan=True).encode("utf-8", errors="surrogatepass")
    old, new = draw(st.sampled_from(_BENDS))
    if old:
        raw = raw.replace(old, new, 1)
    if draw(st.booleans()):
        levels = draw(st.integers(min_value=MAX_DEPTH - 2, max_value=MAX_DEPTH + 3))
        raw = raw.replace(b'"params":', b'"params":' + b'{"a":' * levels, 1)
        raw = raw[:-1] + b"}" * levels + b"}" if raw.endswith(b"}") else raw
    return raw


@settings(max_examples=600, deadline=None)
@given(_compact_messages())
def test_the_fast_reader_gives_the_verdicts_and_values_of_the_strict_parser(raw: bytes) -> None:
    fast = wire_guard._fast_load(raw)
    if fast is not None:  # taken only when the strict parser reads the same value, type by type
        assert _typed(load_json(raw, "the message", envelope=1)) == _typed(fast)
    original = wire_guard._fast_load
    try:
        wire_guard._fast_load = lambda _raw: None  # the strict parser alone: the oracle
        strict = check(raw)
    finally:
        wire_guard._fast_load = original
    assert check(raw) == strict


def test_the_fast_reader_takes_compact_messages_and_leaves_the_rest_to_the_strict_parser() -> None:
    compact = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"plan": TRIP}})
    assert wire_guard._fast_load(compact) is not None  # what the SDK sends: read once, fast
    for doubtful in (
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":123456789012345678901234567890}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "m"}',
    ):
        assert wire_guard._fast_load(doubtful) is None
        with pytest.raises(WireError) if b'"a":1,"a"' in doubtful else contextlib.nullcontext():
            load_json(doubtful, "the message", envelope=1)
    deep = b'{"params":' + b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1) + b"}"
    assert wire_guard._fast_load(deep) is None  # past the limit: the strict parser refuses it (HATP-OBJ-2)


def test_a_message_within_the_limits_passes() -> None:
    assert check(_request({"address": "human://acme.com/role/x", "plan": _nested(MAX_DEPTH - 1)})) is None


def test_params_may_nest_as_deep_as_a_file_and_no_deeper_HATP_OBJ_2() -> None:
    assert check(_request(_nested(MAX_DEPTH))) is None  # the message's own object is not a level of the params
    assert _refused(_request(_nested(MAX_DEPTH + 1))) == (7, -32600, "HATP-OBJ-2")
    assert _refused(_request(_nested(400))) == (7, -32600, "HATP-OBJ-2")


def test_a_duplicate_member_name_is_refused_not_resolved_last_wins_HATP_OBJ_1() -> None:
    raw = b'{"jsonrpc":"2.0","id":"q1","method":"m","params":{"amount":"1.00","amount":"9000.00"}}'
    assert _refused(raw) == ("q1", -32700, "HATP-OBJ-1")


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_json_numbers_are_refused_HATP_OBJ_1(number: bytes) -> None:
    raw = b'{"jsonrpc":"2.0","id":3,"method":"m","params":{"x":' + number + b"}}"
    assert _refused(raw) == (3, -32700, "HATP-OBJ-1")


def test_a_lone_surrogate_is_refused_with_its_path_and_a_surrogate_pair_passes_HATP_OBJ_1() -> None:
    verdict = check(b'{"jsonrpc":"2.0","id":4,"method":"m","params":{"who":["ok","\\ud800"]}}')
    assert verdict is not None
    assert (verdict["id"], verdict["error"]["code"], verdict["error"]["data"]["rule"]) == (4, -32700, "HATP-OBJ-1")
    assert "$.params.who[1]" in verdict["error"]["message"]
    assert check(b'{"jsonrpc":"2.0","id":4,"method":"m","params":{"who":"\\ud83d\\ude00"}}') is None


def test_a_message_larger_than_a_document_may_be_is_refused_naming_its_leading_id_HATP_OBJ_2() -> None:
    raw = _request({"blob": "x" * (MAX_BYTES + 70_000)})
    assert _refused(raw) == (7, -32600, "HATP-OBJ-2")  # the id before the params: the sender can match the answer
    late = b'{"jsonrpc":"2.0","method":"m","params":{"id":5,"blob":"' + b"x" * (MAX_BYTES + 70_000) + b'"},"id":8}'
    assert _refused(late) == (None, -32600, "HATP-OBJ-2")  # only after a nested value: not read, never guessed
    quoted = b'{"jsonrpc":"2.0","method":"{\\"id\\":1","id":"q-9","params":{"b":"' + b"x" * MAX_BYTES + b'"}}'
    assert _refused(quoted + b" " * 70_000) == ("q-9", -32600, "HATP-OBJ-2")  # an id inside a string is not one


@pytest.mark.parametrize("params", [[], "x", 1, True, None])
def test_params_that_are_not_an_object_are_refused_naming_the_request_HATP_WIRE_1(params: Any) -> None:
    assert _refused(_request(params, msg_id=11)) == (11, -32602, "HATP-WIRE-1")


@pytest.mark.parametrize("raw", [b"[]", b'"x"', b"1", b"true", b"[{}]"])
def test_a_message_that_is_not_one_object_is_refused_with_id_null_HATP_WIRE_1(raw: bytes) -> None:
    assert _refused(raw) == (None, -32600, "HATP-WIRE-1")


def test_text_that_is_not_json_is_a_parse_error_with_id_null_HATP_OBJ_1() -> None:
    assert _refused(b'{"jsonrpc":"2.0","id":1,') == (None, -32700, "HATP-OBJ-1")


@pytest.mark.anyio
async def test_a_refused_request_is_answered_and_a_refused_notification_dropped_unanswered_HATP_WIRE_2() -> None:
    said: list[str] = []

    async def answer(text: str) -> None:
        said.append(text)

    assert await screen_line(b'{"jsonrpc":"2.0","method":"notifications/x","params":[]}\n', answer) is False
    assert said == []  # a notification gets no answer, as JSON-RPC says, and never reaches the SDK
    assert await screen_line(_request([], msg_id=5) + b"\n", answer) is False
    assert [json.loads(s)["id"] for s in said] == [5]
    assert said[0].endswith("\n") and said[0].count("\n") == 1
    assert await screen_line(b"\n", answer) is True  # blank lines pass, as before
    assert await screen_line(_request({}) + b"\n", answer) is True


def _stdio_exchange(lines: list[bytes]) -> list[dict[str, Any]]:
    """Write raw lines to a real `servers.directory` over stdio and read one answer per request."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "servers.directory", "--transport", "stdio"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        out, _ = proc.communicate(b"".join(line + b"\n" for line in lines), timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.e2e
def test_over_stdio_every_malformed_request_gets_an_answer_and_the_server_keeps_serving_HATP_WIRE_2() -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }
    answers = _stdio_exchange(
        [
            _request("x", msg_id=1),
            _request(_nested(254), msg_id=2),
            b'{"jsonrpc":"2.0","id":3,"method":"m","params":{"a":1,"a":2}}',
            b'{"jsonrpc":"2.0","id":4,"method":"m","params":{"s":"\\udc00"}}',
            b'{"jsonrpc":"2.0","id":5,"method":"m","params":{"x":NaN}}',
            b"true",
            json.dumps(initialize).encode(),
        ]
    )
    by_id = {a.get("id"): a for a in answers}
    assert {k: by_id[k]["error"]["data"]["rule"] for k in (1, 2, 3, 4, 5)} == {
        1: "HATP-WIRE-1",
        2: "HATP-OBJ-2",
        3: "HATP-OBJ-1",
        4: "HATP-OBJ-1",
        5: "HATP-OBJ-1",
    }
    assert by_id[None]["error"]["code"] == -32600  # `true`: not one object, answered with id null
    assert by_id["init"]["result"]["serverInfo"]["name"] == "hatp-directory"  # still serving, after all of that


@pytest.mark.e2e
@pytest.mark.anyio
async def test_over_http_a_malformed_request_is_answered_400_with_the_rule_and_never_reaches_the_sdk() -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with launch_http("servers.directory", None) as proc, httpx2.AsyncClient(timeout=30) as http:
        with anyio.fail_after(60):
            dup = await http.post(
                proc.url, content=b'{"jsonrpc":"2.0","id":9,"method":"m","params":{"a":1,"a":2}}', headers=headers
            )
            deep = await http.post(proc.url, content=_request(_nested(300), msg_id=10), headers=headers)
            scalar = await http.post(proc.url, content=_request(1, msg_id=11), headers=headers)
            fine = await http.post(
                proc.url,
                content=json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 12,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "0"},
                        },
                    }
                ).encode(),
                headers=headers,
            )
    answers = [(r.status_code, r.json()["id"], r.json()["error"]["data"]["rule"]) for r in (dup, deep, scalar)]
    assert answers == [(400, 9, "HATP-OBJ-1"), (400, 10, "HATP-OBJ-2"), (400, 11, "HATP-WIRE-1")]
    assert fine.status_code == 200  # a well-formed request still reaches the SDK


def _deep_request(levels: int, msg_id: object, *, id_last: bool) -> bytes:
    """A request whose params nest `levels` deep, its id before the params or after them (as the TypeScript SDK
    writes it); built as bytes, since no encoder writes what is this deep."""
    params = b'{"a":' * (levels - 1) + b"{}" + b"}" * (levels - 1)
    head, tail = b'{"jsonrpc":"2.0",', json.dumps(msg_id).encode()
    if id_last:
        return head + b'"method":"m","params":' + params + b',"id":' + tail + b"}"
    return head + b'"id":' + tail + b',"method":"m","params":' + params + b"}"


@pytest.mark.parametrize("levels", [1_000, 100_000])
@pytest.mark.parametrize("id_last", [False, True])
def test_HATP_WIRE_3_a_message_nested_1000_levels_or_more_is_refused_with_its_own_id(
    levels: int, id_last: bool
) -> None:
    assert _refused(_deep_request(levels, "r-9", id_last=id_last)) == ("r-9", -32600, "HATP-OBJ-2")
    assert _refused(_deep_request(levels, 12, id_last=id_last)) == (12, -32600, "HATP-OBJ-2")


@pytest.mark.anyio
async def test_HATP_WIRE_3_a_notification_nested_1000_levels_deep_is_dropped_unanswered() -> None:
    said: list[str] = []

    async def answer(text: str) -> None:
        said.append(text)

    deep = b'{"jsonrpc":"2.0","method":"notifications/x","params":' + b"[" * 1_000 + b"]" * 1_000 + b"}"
    assert await screen_line(deep + b"\n", answer) is False
    assert said == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"jsonrpc":"2.0","method":"{\\"id\\":1}","params":[[1]],"id":3,"id":4}', 3),  # first writing, not a string
        (b'{"jsonrpc":"2.0","params":{"id":5,"x":[' + b"[" * 999 + b"]" * 1000 + b'},"i\\u0064":6}', 6),
        (b'{"jsonrpc":"2.0","id":true,"params":' + b"[" * 1000 + b"]" * 1000 + b"}", None),  # not an id JSON-RPC has
        (b'{"jsonrpc":"2.0","id":7,"params":' + b"[" * 1000 + b"]" * 999 + b"}", None),  # never closes: not read
    ],
)
def test_HATP_WIRE_3_the_scan_reads_only_the_messages_own_id(raw: bytes, expected: object) -> None:
    verdict = check(raw)
    assert verdict is not None and verdict["id"] == expected


@pytest.mark.e2e
def test_HATP_WIRE_3_over_stdio_a_deep_request_is_answered_with_its_id_and_the_server_keeps_serving() -> None:
    answers = _stdio_exchange([_deep_request(1_000, 21, id_last=True), _deep_request(100_000, "deep", id_last=False)])
    assert {a["id"]: a["error"]["data"]["rule"] for a in answers} == {21: "HATP-OBJ-2", "deep": "HATP-OBJ-2"}

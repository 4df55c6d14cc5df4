"""Hypothesis strategies for hostile input: JSON values beyond the safe domain, mutated plans, sagas and records,
and raw bytes that bend the JSON grammar (duplicates, NaN, 1e400, deep nesting, invalid UTF-8, lone surrogates)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "spec" / "fixtures"

# Leaves an attacker reaches for: unsafe integers, every float (NaN and infinities included), lone surrogates,
# empty and huge-ish strings, and the types members usually are not.
hostile_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**53 - 2, max_value=2**70)
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["\ud800", "\udfff", "x\ud83d", "", "0", "-1", "1e400", "NaN", "<script>", "human://", "🙂"])
)
hostile_json = st.recursive(
    hostile_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


@st.composite
def mutated(draw: st.DrawFn, base: Any, steps: int = 3) -> Any:
    """`base` with a few random edits: a member replaced by hostile JSON, deleted, added, or nested deeper."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=steps))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["replace", "delete", "add", "nest"]))
        if not path:
            if op == "replace":
                doc = draw(hostile_json)
            continue
        parent = _get(doc, path[:-1])
        key = path[-1]
        if op == "replace":
            parent[key] = draw(hostile_json)
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(hostile_json)
        elif op == "nest":
            levels = draw(st.integers(min_value=1, max_value=80))
            inner = parent[key]
            for _ in range(levels):
                inner = [inner]
            parent[key] = inner
    return doc


def _fixture(kind: str, name: str) -> Any:
    return json.loads((FIXTURES / kind / name).read_text())


TRIP = _fixture("hatp", "trip.valid.json")
SAGA = _fixture("saga", "supplier-onboarding.valid.json")
plans = mutated(TRIP)
sagas = mutated(SAGA)


@st.composite
def json_texts(draw: st.DrawFn, base: Any) -> bytes:
    """JSON text of a (mutated) document, then bent at the byte level."""
    doc = draw(mutated(base))
    try:
        text = json.dumps(doc, allow_nan=True)
    except (ValueError, RecursionError):
        text = "{}"
    raw = text.encode("utf-8", errors="surrogatepass")
    op = draw(st.sampled_from(["as-is", "duplicate", "nan", "overflow", "deep", "truncate", "bad-utf8", "bom"]))
    if op == "duplicate" and raw.startswith(b"{") and len(raw) > 2:
        raw = b'{"hatp":"1","hatp":"2",' + raw[1:] if raw != b"{}" else b'{"a":1,"a":2}'
    elif op == "nan":
        raw = raw.replace(b"1", b"NaN", 1)
    elif op == "overflow":
        raw = raw.replace(b"1", b"1e400", 1)
    elif op == "deep":
        n = draw(st.integers(min_value=60, max_value=3000))
        raw = b"[" * n + raw + b"]" * n
    elif op == "truncate" and raw:
        raw = raw[: draw(st.integers(min_value=0, max_value=len(raw) - 1))]
    elif op == "bad-utf8":
        at = draw(st.integers(min_value=0, max_value=len(raw)))
        raw = raw[:at] + b"\xff\xc3" + raw[at:]
    elif op == "bom":
        raw = b"\xef\xbb\xbf" + raw
    return raw


def jsonrpc_messages() -> st.SearchStrategy[bytes]:
    """What an MCP client could send: a hatp/* request around a hostile params value, bent at the byte level."""
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "hatp/txn/prepare", "params": {"plan": TRIP, "branchId": "seat"}}
    return json_texts(envelope) | st.binary(max_size=64)

"""Untrusted bytes: only clean, one-line WireErrors come out, never another exception (HATP-OBJ-1, HATP-OBJ-2)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.model.wire import MAX_BYTES, MAX_DEPTH, WireError, load_json, parse
from hatp_mcp.core.model.wire_models import WIRE_MODELS


@pytest.mark.parametrize(
    "data",
    [b"{", b'{"a": 1,}', b"\xff\xfe{}", b'{"a": NaN}', b'{"a": 1, "a": 2}', b"[Infinity]", b""],
)
def test_malformed_json_is_refused_as_not_json_HATP_OBJ_1(data: bytes) -> None:
    with pytest.raises(WireError) as err:
        load_json(data, "plan.json")
    assert err.value.rule == "HATP-OBJ-1"
    assert err.value.reason.startswith("plan.json: ")
    assert "\n" not in str(err.value)


def test_huge_or_deeply_nested_documents_are_refused_before_use_HATP_OBJ_2() -> None:
    with pytest.raises(WireError) as err:
        load_json(b" " * (MAX_BYTES + 1), "big.json")
    assert err.value.rule == "HATP-OBJ-2"
    for depth in (MAX_DEPTH + 1, 5000):
        with pytest.raises(WireError) as err:
            load_json(b"[" * depth + b"]" * depth, "deep.json")
        assert err.value.rule == "HATP-OBJ-2"
    assert load_json(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None


def _levels(value: object) -> int:
    """The oracle: how many levels of objects and arrays `value` nests, by a plain walk of every member."""
    if isinstance(value, dict):
        return 1 + max((_levels(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_levels(v) for v in value), default=0)
    return 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["object", "array", "object-first", "array-last"]), min_size=1, max_size=MAX_DEPTH + 3),
    st.integers(min_value=0, max_value=3),
)
def test_the_depth_limit_counts_every_level_of_objects_and_arrays_wherever_the_deepest_path_runs_HATP_OBJ_2(
    shape: list[str], tail: int
) -> None:
    value: object = [[]] * tail or 1
    for kind in shape:  # the deep path sits among shallow siblings, before or after them
        if kind == "object":
            value = {"a": 1, "deep": value, "z": [{}]}
        elif kind == "object-first":
            value = {"deep": value, "b": {"c": []}}
        elif kind == "array":
            value = [{"x": 1}, value, []]
        else:
            value = [[], {"y": [1]}, value]
    data = json.dumps(value).encode()
    if _levels(value) > MAX_DEPTH:
        with pytest.raises(WireError) as err:
            load_json(data, "deep.json")
        assert err.value.rule == "HATP-OBJ-2"
    else:
        assert load_json(data, "deep.json") == value


def test_a_duplicate_member_is_named_wherever_it_sits_HATP_OBJ_1() -> None:
    with pytest.raises(WireError) as err:
        load_json(b'{"a": [{"k": 1, "x": 2, "k": 3}], "b": 1}', "dup.json")
    assert err.value.rule == "HATP-OBJ-1"
    assert "duplicate key 'k'" in err.value.reason
    assert load_json(b'{"k": {"k": {"k": 1}}, "x": [{"k": 2}, {"k": 3}]}') == {
        "k": {"k": {"k": 1}},
        "x": [{"k": 2}, {"k": 3}],
    }


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from(sorted(WIRE_MODELS)))
def test_arbitrary_json_yields_a_model_or_a_clean_wire_error(value: object, name: str) -> None:
    try:
        data = json.dumps(value).encode()
    except ValueError:
        return
    try:
        parse(WIRE_MODELS[name], load_json(data, "fuzz.json"), "fuzz.json")
    except WireError as err:
        assert err.rule in {"HATP-OBJ-1", "HATP-OBJ-2", "HATP-OBJ-3"}
        assert "\n" not in str(err)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_yield_json_or_a_clean_wire_error(data: bytes) -> None:
    try:
        load_json(data, "fuzz.json")
    except WireError as err:
        assert err.rule in {"HATP-OBJ-1", "HATP-OBJ-2"}


def test_a_member_name_with_odd_characters_is_quoted_in_the_error_path_HATP_OBJ_3() -> None:
    from hatp_mcp.core.model.amount import Amount

    with pytest.raises(WireError) as err:
        parse(Amount, {"value": "1", "currency": "USD", "evil\nkey": 1}, "a.json")
    assert err.value.path == '["evil\\nkey"]'
    assert "\n" not in str(err.value)

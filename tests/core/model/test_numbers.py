"""Numbers have one meaning (HATP-OBJ-4): NaN, infinities and numbers beyond a double are refused by every parser,
and no normalization maps two different JSON values to one digest."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.record import RecordEvent
from hatp_mcp.core.model.wire import WireError, load_json, parse
from tests.factories import trip_plan_json

SAFE = 2**53 - 1


def with_args(args: dict[str, Any]) -> dict[str, Any]:
    plan = trip_plan_json()
    plan["branches"][0]["args"] = args
    return plan


@pytest.mark.parametrize(
    ("text", "shown"),
    [(b'{"x": 1e400}', "1e400"), (b'{"x": -1e400}', "-1e400"), (b'{"x": ' + b"9" * 400 + b"}", "400 digits")],
)
def test_HATP_OBJ_4_a_number_that_overflows_a_double_is_refused_by_the_file_parser(text: bytes, shown: str) -> None:
    with pytest.raises(WireError) as err:
        load_json(text, "plan.json")
    assert err.value.rule == "HATP-OBJ-4" and shown in err.value.reason and err.value.reason.startswith("plan.json")
    assert load_json(b'{"x": 1.5e300, "y": -12}') == {"x": 1.5e300, "y": -12}  # what a double holds is read as is


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan"), 10**400, -(10**400)])
def test_HATP_OBJ_4_a_non_finite_number_inside_args_is_refused_never_made_null(bad: Any) -> None:
    with pytest.raises(WireError) as err:
        parse(Plan, with_args({"x": {"y": [1, bad]}}), "plan")
    assert err.value.rule == "HATP-OBJ-4"
    assert err.value.path == "branches[0].args.x.y[1]"
    # the attack: {"x": 1e400}, {"x": -1e400} and {"x": null} had one digest; now only null is a plan
    assert Plan.model_validate(with_args({"x": None})).wire()["branches"][0]["args"] == {"x": None}


def test_HATP_OBJ_4_a_non_finite_number_deep_among_finite_floats_is_refused_by_its_path() -> None:
    """The check's first walk (canonical JSON's fast-path domain) gives up at the first float it meets; finite
    floats around the bad number, 200 levels down, must not hide it."""
    inner: Any = [0.5, float("inf")]
    for _ in range(200):
        inner = {"a": [1.5, "s", inner]}
    with pytest.raises(WireError) as err:
        parse(Plan, with_args({"x": inner}), "plan")
    assert err.value.rule == "HATP-OBJ-4"
    assert err.value.path == "branches[0].args.x" + ".a[2]" * 200 + "[1]"


def test_HATP_OBJ_4_evidence_and_record_bodies_refuse_them_too() -> None:
    event = {
        "txnId": "t1",
        "seq": 0,
        "planDigest": "sha256:" + "0" * 64,
        "event": "vote",
        "author": "a",
        "at": "2026-11-29T10:00:00Z",
        "body": {"branchId": "seat"},
        "evidence": {"type": "hatp.vote", "cost": float("nan")},
    }
    with pytest.raises(WireError) as err:
        parse(RecordEvent, event, "event")
    assert (err.value.rule, err.value.path) == ("HATP-OBJ-4", "evidence.cost")


def _key(value: Any) -> str:
    """JSON identity: `true` and `1` differ (Python's == says they are equal)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)  # no lone surrogates (HATP-CANON-2)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(a=_json, b=_json)
def test_distinct_json_values_in_args_give_distinct_plan_digests(a: Any, b: Any) -> None:
    pa, pb = Plan.model_validate(with_args({"v": a})), Plan.model_validate(with_args({"v": b}))
    # the normalized form keeps the value exactly (so canonical JSON, which is injective, sees the value itself)
    assert _key(pa.wire()["branches"][0]["args"]["v"]) == _key(a)
    assert (pa.digest() == pb.digest()) == (_key(a) == _key(b))

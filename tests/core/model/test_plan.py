"""The Plan's digest: computed once per live object, and its fast path (canonical's walk limited to `args`) proven
equal to the whole-value canonical path and to the pure-Python oracle, bytes and refusals alike."""

from __future__ import annotations

import copy
import gc
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from hatp_mcp.core.model import plan as plan_module
from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import MAX_SAFE_INTEGER, CanonicalError, canonical_exact, digest, digest_bytes
from tests.factories import trip_plan_json


def _free_fields(model: type[BaseModel], where: str, out: set[str]) -> None:
    """Every field of `model` (recursively) whose JSON dump may hold anything but str/int/bool/None and containers
    of them, as `Model.field`; fails on an integer that may be unsafe (HATP-CANON-2)."""
    for name, field in model.model_fields.items():
        _free_type(field.annotation, field.metadata, f"{model.__name__}.{name}", out)


def _free_type(tp: Any, metadata: list[Any], where: str, out: set[str]) -> None:
    origin = get_origin(tp)
    if origin is Annotated:
        inner, *more = get_args(tp)
        _free_type(inner, [*metadata, *more], where, out)
    elif origin in (Union, types.UnionType):
        for arm in get_args(tp):
            _free_type(arm, metadata, where, out)
    elif origin is Literal:
        assert all(type(v) is str for v in get_args(tp)), where
    elif origin is list:
        _free_type(get_args(tp)[0], [], where, out)
    elif origin is dict:
        key, value = get_args(tp)
        assert key is str, where
        if value is Any:
            out.add(where)
        else:
            _free_type(value, [], where, out)
    elif tp is type(None) or tp is str or tp is bool:
        pass
    elif tp is int:
        flat = [n for m in metadata for n in (m.metadata if isinstance(m, FieldInfo) else [m])]
        bounds = {k: getattr(m, k) for m in flat for k in ("ge", "le") if getattr(m, k, None) is not None}
        assert -MAX_SAFE_INTEGER <= bounds["ge"] and bounds["le"] <= MAX_SAFE_INTEGER, where
    elif isinstance(tp, type) and issubclass(tp, WireModel):
        _free_fields(tp, where, out)
    else:
        raise AssertionError(f"{where}: {tp!r} is not a type the plan digest's fast path knows")


def test_only_branch_and_compensation_args_can_hold_values_outside_the_canonical_domain_HATP_CANON_2() -> None:
    # The premise of the fast digest (hatp_mcp.core.model.plan._digest walks exactly these): every other member is
    # a string, a bounded integer, a boolean, a literal, or an object or list of those.
    free: set[str] = set()
    _free_fields(Plan, "Plan", free)
    assert free == {"Branch.args", "Compensation.args"}


def _oracle(plan: Plan) -> str:
    return digest_bytes(canonical_exact(plan.wire()))


def _refusal(plan: Plan, how: Any) -> tuple[str, str, str] | None:
    try:
        how(plan)
    except CanonicalError as exc:
        return (exc.rule, exc.path, str(exc))
    return None


# Mostly text inside the Basic Multilingual Plane, where the fast path itself answers; now and then any text, which
# it hands to the exact path (member order differs beyond the BMP).
text = st.text(st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), max_size=8) | st.text(max_size=4)
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4), max_leaves=12
)
safe_leaf = st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | text
safe_values = st.recursive(
    safe_leaf, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4), max_leaves=12
)


@settings(max_examples=300, deadline=None)
@given(
    args=st.dictionaries(text, json_values | safe_values, max_size=4),
    undo=st.dictionaries(text, json_values | safe_values, max_size=3),
    summary=st.sampled_from(["", "Lisbon, 3 nights", "caf\u00e9 \u20ac12", "\U0001f600 beyond the BMP"]),
)
def test_the_fast_plan_digest_equals_the_exact_path_in_bytes_and_refusals_HATP_DIG_1(
    args: dict[str, Any], undo: dict[str, Any], summary: str
) -> None:
    raw = trip_plan_json()
    raw["branches"][0]["args"] = args
    raw["branches"][2]["compensation"]["args"] = undo
    raw["summary"] = summary  # any text, beyond the BMP included: the fast path hands those to the exact one
    try:
        plan = Plan.model_validate(raw)
    except ValueError:
        return  # a lone surrogate in a typed string is refused by the schema, before any digest
    expected = _refusal(plan, _oracle)
    assert _refusal(plan, plan_module.has_canonical_form) == expected  # proven without hashing, or refused alike
    assert _refusal(plan, plan_module._digest) == expected
    assert _refusal(plan, lambda p: digest(p.wire())) == expected
    if expected is None:
        assert plan_module._digest(plan) == _oracle(plan) == digest(plan.wire())
        assert canonical_exact(plan.wire()) == rfc8785.dumps(plan.wire())


@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        (("branches", 0, "args"), {"n": 1.5}, "$.branches[0].args.n"),
        (("branches", 3, "args"), {"n": [MAX_SAFE_INTEGER + 1]}, "$.branches[3].args.n[0]"),
        (("branches", 2, "compensation", "args"), {"k": "\ud800"}, "$.branches[2].compensation.args.k"),
    ],
)
def test_a_plan_whose_args_have_no_canonical_form_is_refused_as_the_exact_path_refuses_it_HATP_CANON_2(
    where: tuple[Any, ...], value: dict[str, Any], path: str
) -> None:
    raw = trip_plan_json()
    node: Any = raw
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    plan = Plan.model_validate(raw)
    with pytest.raises(CanonicalError) as err:
        plan.digest()
    assert (err.value.rule, err.value.path) == ("HATP-CANON-2", path)
    assert _refusal(plan, _oracle) == _refusal(plan, lambda p: p.digest())
    fresh = Plan.model_validate(raw)
    assert _refusal(fresh, plan_module.has_canonical_form) == _refusal(fresh, _oracle)


def test_what_is_remembered_of_a_plan_lives_as_long_as_the_plan() -> None:
    plan = Plan.model_validate(trip_plan_json())
    first = plan.digest()
    key = id(plan)
    assert plan_module._MEMO[key][1]["digest"] == first
    del plan
    gc.collect()
    assert key not in plan_module._MEMO
    # a plan parsed from the same content (possibly at the same address) computes its own digest
    again = Plan.model_validate(copy.deepcopy(trip_plan_json()))
    assert again.digest() == first == _oracle(again)


def test_a_changed_copy_holding_a_value_its_field_does_not_type_digests_as_the_whole_value_path_does() -> None:
    # model_copy(update=...) is not validated: a float in a typed member must still be refused, never hashed
    plan = Plan.model_validate(trip_plan_json())
    seat = plan.branches[0].model_copy(update={"lease_seconds": 1800.5})
    changed = plan.model_copy(update={"branches": [seat, *plan.branches[1:]]})
    with pytest.warns(UserWarning):
        expected = _refusal(changed, lambda p: digest(p.wire()))
    assert expected is not None and expected[1] == "$.branches[0].leaseSeconds"
    with pytest.warns(UserWarning):
        assert _refusal(changed, plan_module._digest) == expected


def test_a_plan_validation_made_is_proven_canonical_without_hashing_and_any_other_is_hashed() -> None:
    plan = Plan.model_validate(trip_plan_json())
    plan_module.has_canonical_form(plan)
    assert "digest" not in plan_module._MEMO[id(plan)][1]  # proven from its types and its plain args
    # a changed copy is not marked as validated: its canonical form is computed (and remembered) to be known
    copied = plan.model_copy(update={"summary": "changed"})
    plan_module.has_canonical_form(copied)
    assert plan_module._MEMO[id(copied)][1]["digest"] == _oracle(copied)
    # and a copy holding a value its field does not type is refused as the exact path refuses it
    seat = plan.branches[0].model_copy(update={"lease_seconds": 1800.5})
    broken = plan.model_copy(update={"branches": [seat, *plan.branches[1:]]})
    with pytest.warns(UserWarning):
        assert _refusal(broken, plan_module.has_canonical_form) == _refusal(broken, _oracle) is not None


@pytest.mark.parametrize("args", [{"nested": {1: "a key the JSON dump makes a string"}}, {"t": (1, 2)}])
def test_args_the_json_dump_converts_are_not_taken_as_proven_but_hashed_and_found_canonical(
    args: dict[str, Any],
) -> None:
    raw = trip_plan_json()
    raw["branches"][1]["args"] = args
    plan = Plan.model_validate(raw)
    plan_module.has_canonical_form(plan)  # no refusal: the wire form (`"1"`, a list) has a canonical form
    assert plan_module._MEMO[id(plan)][1]["digest"] == _oracle(plan) == digest(plan.wire())

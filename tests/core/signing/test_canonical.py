"""RFC 8785 canonical JSON: the RFC's own examples, equality with the `rfc8785` package, and the safe domain."""

from __future__ import annotations

import json
import struct

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.signing.canonical import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    CanonicalError,
    canonical,
    canonical_exact,
    digest,
    es6_number,
)

# RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical ECMAScript form (HATP-CANON-1).
APPENDIX_B = {
    "0000000000000000": "0",
    "8000000000000000": "0",
    "0000000000000001": "5e-324",
    "8000000000000001": "-5e-324",
    "7fefffffffffffff": "1.7976931348623157e+308",
    "ffefffffffffffff": "-1.7976931348623157e+308",
    "4340000000000000": "9007199254740992",
    "c340000000000000": "-9007199254740992",
    "4430000000000000": "295147905179352830000",
    "44b52d02c7e14af5": "9.999999999999997e+22",
    "44b52d02c7e14af6": "1e+23",
    "44b52d02c7e14af7": "1.0000000000000001e+23",
    "444b1ae4d6e2ef4e": "999999999999999700000",
    "444b1ae4d6e2ef4f": "999999999999999900000",
    "444b1ae4d6e2ef50": "1e+21",
    "3eb0c6f7a0b5ed8c": "9.999999999999997e-7",
    "3eb0c6f7a0b5ed8d": "0.000001",
    "41b3de4355555553": "333333333.3333332",
    "41b3de4355555554": "333333333.33333325",
    "41b3de4355555555": "333333333.3333333",
    "41b3de4355555556": "333333333.3333334",
    "41b3de4355555557": "333333333.33333343",
    "becbf647612f3696": "-0.0000033333333333333333",
    "43143ff3c1cb0959": "1424953923781206.2",
}


@pytest.mark.parametrize(("bits", "expected"), sorted(APPENDIX_B.items()))
def test_numbers_serialize_as_rfc8785_appendix_b_says_HATP_CANON_1(bits: str, expected: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert es6_number(value) == expected
    assert canonical(value, allow_floats=True) == expected.encode()
    # inside containers the fast path (orjson with each float as an ECMAScript fragment) prints the same
    wrapped = {"n": [value, {"m": value}]}
    assert canonical(wrapped, allow_floats=True) == f'{{"n":[{expected},{{"m":{expected}}}]}}'.encode()
    assert canonical(wrapped, allow_floats=True) == canonical_exact(wrapped, allow_floats=True)


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_nan_and_infinities_have_no_canonical_form(bits: str) -> None:
    value = struct.unpack(">d", bytes.fromhex(bits))[0]
    with pytest.raises(CanonicalError) as err:
        canonical(value, allow_floats=True)
    assert err.value.rule == "HATP-CANON-2"


def test_the_rfc_section_3_2_2_example_canonicalizes_exactly() -> None:
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonical(json.loads(source), allow_floats=True) == expected.encode()


def test_members_sort_by_utf16_code_units_as_in_rfc_section_3_2_3() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    keys = list(json.loads(canonical(value)).keys())
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert canonical(value) == rfc8785.dumps(value)


json_leaf = st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | st.text()
json_values = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5), max_leaves=40
)


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_canonical_equals_the_reference_implementation_on_arbitrary_json(value: object) -> None:
    assert canonical(value) == rfc8785.dumps(value)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        json_leaf | st.floats(allow_nan=False, allow_infinity=False),
        lambda i: st.lists(i, max_size=4) | st.dictionaries(st.text(), i, max_size=4),
        max_leaves=20,
    )
)
def test_canonical_with_floats_equals_the_reference_implementation_and_the_exact_path(value: object) -> None:
    fast = canonical(value, allow_floats=True)
    assert fast == rfc8785.dumps(value)
    assert fast == canonical_exact(value, allow_floats=True)


@settings(max_examples=500, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False) | st.floats(min_value=1e-8, max_value=1e22))
def test_every_finite_float_prints_as_the_reference_and_the_exact_path_print_it(value: float) -> None:
    assert (
        canonical([value], allow_floats=True) == rfc8785.dumps([value]) == canonical_exact([value], allow_floats=True)
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_float_inside_a_container_is_refused_with_its_path_even_where_floats_are_allowed(
    bad: float,
) -> None:
    with pytest.raises(CanonicalError) as err:
        canonical({"a": [1.5, {"b": bad}]}, allow_floats=True)
    assert (err.value.rule, err.value.path) == ("HATP-CANON-2", "$.a[1].b")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": [1, 2.5]}, "$.a[1]"),
        ({"n": MAX_SAFE_INTEGER + 1}, "$.n"),
        ([{"x": -(MAX_SAFE_INTEGER + 1)}], "$[0].x"),
        ({1: "non-string key"}, "$"),
        ({"t": (1, 2)}, "$.t"),
        ({"b": b"bytes"}, "$.b"),
    ],
)
def test_values_outside_the_safe_domain_are_refused_with_their_path(value: object, path: str) -> None:
    with pytest.raises(CanonicalError) as err:
        canonical(value)
    assert err.value.rule == "HATP-CANON-2"
    assert err.value.path == path


def test_a_lone_surrogate_is_refused_with_its_path() -> None:
    for value, path in (({"k": "\ud800"}, "$.k"), ({"k": ["ok", "\udfff"]}, "$.k[1]"), ({"\ud800": 1}, "$")):
        with pytest.raises(CanonicalError) as err:
            canonical(value)
        assert (err.value.rule, err.value.path) == ("HATP-CANON-2", path)


def _nested(depth: int, inner: object = 1) -> object:
    """`inner` inside `depth` containers, objects and arrays by turns."""
    value = inner
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def test_HATP_CANON_2_a_value_nested_too_deep_is_refused_by_name_never_a_recursion_error() -> None:
    deepest = _nested(MAX_DEPTH)
    assert canonical(deepest) == canonical_exact(deepest) == rfc8785.dumps(deepest)
    assert canonical(_nested(MAX_DEPTH, 0.5), allow_floats=True) == rfc8785.dumps(_nested(MAX_DEPTH, 0.5))
    for depth in (MAX_DEPTH + 1, 5_000, 100_000):  # an attacker's argument: far past Python's own recursion limit
        for allow_floats in (False, True):
            with pytest.raises(CanonicalError) as err:
                canonical(_nested(depth, 0.5), allow_floats=allow_floats)
            assert err.value.rule == "HATP-CANON-2" and "nested deeper than 254" in err.value.reason
            assert err.value.path.count("[") + err.value.path.count(".a") == MAX_DEPTH
        with pytest.raises(CanonicalError):
            digest(_nested(depth))


def test_digest_is_sha256_of_the_canonical_bytes() -> None:
    import hashlib

    value = {"b": 1, "a": "x"}
    assert digest(value) == "sha256:" + hashlib.sha256(b'{"a":"x","b":1}').hexdigest()

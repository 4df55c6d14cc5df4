"""RFC 8785 canonical JSON (canonical.py) as compiled by mypyc (setup.py), against its own source.

Here the compiled module must be the one imported, built from its current source (tests/compiled.py says why). And
the source, loaded by path under another name as plain Python, must give what the compiled module gives: the same
bytes, digests and answers, and the same exceptions (type, rule, reason, path, fix), from every public function and
the type walk, on the RFC 8785 vectors, on a signed trip record, on generated JSON values and on values where compiled
and interpreted code could part (bools, subclasses, huge ints, signed zero, NaN, lone surrogates, non-JSON types,
non-string keys, nesting at and past MAX_DEPTH). The data arguments are `Any`, es6_number's too; the others (a flag,
a path, canonical_typed's dict and list, digest_bytes' bytes) hold mypy's types, which the compiled module enforces.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import pickle
import re
import struct
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.signing import canonical
from hatp_mcp.errors import HatpError
from tests.compiled import (
    EDGES,
    ROOT,
    Dict,
    Float,
    Int,
    List,
    Str,
    build_problem,
    compiled_modules,
    compiled_sources,
    edged,
    load_as_python,
    outcome,
)
from tests.core.signing.test_canonical import APPENDIX_B, _nested, json_leaf, json_values
from tests.factories import signed_trip_record

MAX_DEPTH = canonical.MAX_DEPTH
MAX_SAFE_INTEGER = canonical.MAX_SAFE_INTEGER
VECTORS = json.loads((ROOT / "spec" / "vectors" / "canonical.json").read_text())


def test_the_canonical_json_module_imported_here_is_the_compiled_one_built_from_its_source() -> None:
    assert canonical.__name__ in compiled_modules()
    problem = build_problem(canonical)
    assert problem is None, problem


def test_the_makefile_builds_again_on_an_edit_to_any_module_setup_py_compiles() -> None:
    """The venv's stamp depends on the Makefile's COMPILED: a module setup.py compiles and the Makefile does not
    list would keep running its old build after an edit."""
    (line,) = re.findall(r"^COMPILED := (.*)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert line.split() == compiled_sources()


PY = load_as_python(canonical, "canonical_as_python")


def test_the_python_twin_is_python_and_holds_the_same_constants() -> None:
    assert PY.__file__ and PY.__file__.endswith("canonical.py") and PY is not canonical
    assert PY.CanonicalError is not canonical.CanonicalError
    for name in ("__all__", "MAX_DEPTH", "MAX_SAFE_INTEGER", "_OPT"):
        assert getattr(PY, name) == getattr(canonical, name)
    # the character class built with chr() (mypyc refuses the literal) is the lone surrogates' range, in both
    assert PY._SURROGATE.pattern == canonical._SURROGATE.pattern == "[\ud800-\udfff]"


def _calls(m: ModuleType, value: Any) -> list[Any]:
    """What every public function (and the type walk) of `m` gives or raises on `value`."""
    calls: list[Callable[[], Any]] = [
        lambda: m.canonical(value),
        lambda: m.canonical(value, allow_floats=True),
        lambda: m.canonical_exact(value),
        lambda: m.canonical_exact(value, allow_floats=True),
        lambda: m.canonical_typed({"v": value}, [value]),
        lambda: m.canonical_typed({"v": value, "n": 1}, []),  # a broken promise: still the same answer
        lambda: m.surely_canonical(value),
        lambda: m.digest(value),
        lambda: m.digest_bytes(m.canonical(value, allow_floats=True)),
        lambda: m.es6_number(value),
        lambda: m.es6_number(value, "$.n"),
        lambda: m._fast_walk(value),
    ]
    if isinstance(value, dict):
        calls.append(lambda: m.canonical_typed(value, [value]))
    return [outcome(call) for call in calls]


def _same(value: Any) -> None:
    compiled = _calls(canonical, value)
    assert _calls(PY, value) == compiled


def test_the_compiled_module_and_its_source_agree_on_the_rfc_8785_vectors() -> None:
    for case in VECTORS["cases"]:
        value = json.loads(case["input"])
        _same(value)
        got = outcome(functools.partial(canonical.canonical, value, allow_floats=case["allowFloats"]))
        if "refused" in case:
            assert got[0] == "raised" and got[3]["rule"] == case["refused"], case["name"]
        else:
            assert got == case["canonical"].encode(), case["name"]
    for bits in APPENDIX_B:
        number = struct.unpack(">d", bytes.fromhex(bits))[0]
        _same(number)
        _same({"n": [number, {"m": number}]})


def test_the_compiled_module_and_its_source_agree_on_a_signed_trip_record() -> None:
    record, _, _ = signed_trip_record()
    _same(record)
    for event in record["events"]:
        _same(event)


class _Key:
    """A hashable non-JSON key."""

    def __repr__(self) -> str:
        return "_Key()"


# Values where compiled and interpreted code could part, beyond EDGES' (which generated values get swapped in)
_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, Int(1), MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1,
    -MAX_SAFE_INTEGER - 1, 2**53, -(2**53), 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 2**64 + 1, 10**30,
    -(10**30), 2**1000, 2**2000, -(2**2000), 0.0, -0.0, 0.5, -1.5, 1.0, 100.0, 1e16, 1e21, 1e-7, 5e-324,
    -5e-324, 2.0**53, 2.0**53 + 2, 1.7976931348623157e308, math.nan, -math.nan, math.inf, -math.inf, Float(1.5),
    Float(math.nan), "", "x", Str("x"), "\ud800", "\udfff", "a\udc80b", "\ud83d\ude00", "\U0001f600", "\u20ac",
    "\ufb33", "\x00\x1f\x7f", '"\\', "\u2028", Str("\U0001f600"), [], {}, List([1]), Dict(a=1), (1, 2), (),
    {1, 2}, frozenset(), b"bytes", bytearray(b"x"), memoryview(b"x"), {1: "x"}, {None: 1}, {True: 1}, {1.5: 1},
    {(1, 2): 1}, {_Key(): 1}, {Str("k"): 1}, {"\ud800": 1}, {"\U0001f600": 1, "\ufb33": 2, "\r": 3},
    {"a": {"b": [1, 2.5, {"c": None}]}}, [[[]]], [{}], object(), _Key(), Exception("x"), type, len,
]  # fmt: skip


def test_the_compiled_module_and_its_source_agree_on_values_where_they_could_part() -> None:
    for value in _VALUES:
        for wrapped in (value, [value], {"k": value}, [1, {"k": [value, "s"]}], {"\U0001f600": value}):
            _same(wrapped)
        for edge in EDGES:
            _same(edge(value))


def test_the_compiled_module_and_its_source_agree_on_nesting_at_and_past_max_depth() -> None:
    for depth in (MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2, 5_000):
        for inner in (1, 0.5, "\ud800", "\U0001f600", 2**53, (1,), {1: 2}, math.nan):
            _same(_nested(depth, inner))


_floats = st.floats() | st.floats(min_value=1e-8, max_value=1e22) | st.sampled_from([-0.0, 5e-324, 1e21, 1e-7])
json_with_floats = st.recursive(
    json_leaf | _floats,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=40,
)
# Beyond EDGES: non-BMP text, values that are not JSON, a surrogate or non-string key, the safe integers' bounds
_CANONICAL_EDGES: list[Callable[[Any], Any]] = [
    *EDGES,
    lambda v: "\U0001f600" + v if type(v) is str else v,
    lambda v: {"\U0001f600": v, "\ufb33": v},
    lambda v: {"\ud800": v},
    lambda v: {Str("k"): v},
    lambda v: [v, (v,), frozenset([1])],
    lambda v: b"x",
    lambda v: MAX_SAFE_INTEGER if type(v) is int else -MAX_SAFE_INTEGER - 1,
]


@settings(max_examples=600, deadline=None)
@given(json_values)
def test_the_compiled_module_and_its_source_agree_on_generated_json(value: Any) -> None:
    _same(value)


@settings(max_examples=600, deadline=None)
@given(json_with_floats)
def test_the_compiled_module_and_its_source_agree_on_generated_json_with_floats(value: Any) -> None:
    _same(value)


@settings(max_examples=1500, deadline=None)
@given(edged(json_values | json_with_floats, _CANONICAL_EDGES))
def test_the_compiled_module_and_its_source_agree_on_generated_json_with_edge_values(value: Any) -> None:
    _same(value)


@settings(max_examples=300, deadline=None)
@given(st.floats() | st.integers() | st.booleans(), st.text())
def test_es6_number_compiled_and_as_python_agree_on_every_number_and_path(number: Any, path: str) -> None:
    assert outcome(lambda: PY.es6_number(number, path)) == outcome(lambda: canonical.es6_number(number, path))


def _error(m: ModuleType) -> Any:
    """The CanonicalError `m` raises for a float where floats are not allowed, caught as a HatpError."""
    try:
        m.canonical({"a": [1, {"b": 2.5}]})
    except HatpError as exc:
        return exc
    raise AssertionError("no CanonicalError")


def _seen(err: Any) -> Any:
    return (type(err).__qualname__, err.args, err.to_dict(), str(err), repr(err))


def test_canonical_error_is_raised_caught_pickled_copied_and_subclassed_as_its_source_does() -> None:
    seen: list[Any] = []
    for m in (canonical, PY):
        err = _error(m)
        assert isinstance(err, m.CanonicalError) and isinstance(err, HatpError) and isinstance(err, Exception)
        with mock.patch.dict(sys.modules, {PY.__name__: PY}):  # pickle finds a class by its module's name
            unpickled = pickle.loads(pickle.dumps(err))
        assert type(unpickled) is m.CanonicalError

        class Sub(m.CanonicalError):
            pass

        sub = Sub(Str("a reason"), Str("$.p"), "a fix")
        assert isinstance(sub, m.CanonicalError)
        seen.append(
            (
                _seen(err),
                err.rule,
                err.reason,
                err.path,
                err.fix,
                [c.__qualname__ for c in type(err).__mro__],
                _seen(unpickled),
                _seen(copy.copy(err)),
                _seen(copy.deepcopy(err)),
                _seen(sub),
                _seen(m.CanonicalError("r")),
            )
        )
    assert seen[0] == seen[1]
    assert seen[0][3] == "$.a[1].b"  # the comparison is of real errors


def test_the_comparison_sees_a_difference_between_the_two() -> None:
    """Planted differences in the Python twin are noticed: a bound one less (a value the compiled module takes is
    refused), and an error with a longer path (the same type, reason and fix)."""
    value = {"n": MAX_SAFE_INTEGER}
    with mock.patch.object(PY, "MAX_SAFE_INTEGER", MAX_SAFE_INTEGER - 1), pytest.raises(AssertionError):
        _same(value)

    class CanonicalError(PY.CanonicalError):
        def __init__(self, reason: str, path: str = "", fix: str = "") -> None:
            super().__init__(reason, path + ".x", fix)

    with mock.patch.object(PY, "CanonicalError", CanonicalError), pytest.raises(AssertionError):
        _same({"a": 1.5})
    _same(value)
    _same({"a": 1.5})

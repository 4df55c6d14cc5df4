"""The saga reader and rules (saga_view.py, saga_rules.py) as compiled by mypyc (setup.py), against their own source.

Here the compiled modules must be the ones imported: a build that silently fell back to Python (setup.py's fallback
for a machine without a C compiler) would be correct and slow, and one older than its source would run old code. And
compiled code is not quite Python (annotations are enforced, ints and floats are unboxed, a class is native), so the
source itself, loaded by path under other names as plain Python, must give what the compiled modules give: the same
violations (rule, path, message, order), the same values read, the same exceptions, on the fixtures, on generated
near-valid sagas and on values where compiled and interpreted Python could part (bools, subclasses, huge ints).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.validate import saga as saga_mod
from hatp_mcp.core.validate import saga_rules, saga_view
from tests.core.validate.test_saga import FIXTURE_PLANS, NOWS, _nodes, near_valid_sagas, saga, schema_valid_sagas

COMPILED = (saga_view, saga_rules)
REBUILD = "run `make install` (setup.py compiles it with mypyc; it needs a C compiler)"


def _file(module: ModuleType, suffix: str) -> Path:
    """The file of a module beside saga.py (which stays Python). Not the compiled module's own __file__: mypyc
    gives a module that another one of its library imports first a wrong one (the package path twice)."""
    return Path(saga_mod.__file__).with_name(module.__name__.rpartition(".")[2] + suffix)


def _source(module: ModuleType) -> Path:
    return _file(module, ".py")


def test_the_saga_reader_and_rules_imported_here_are_the_compiled_ones_built_from_their_source() -> None:
    for module in COMPILED:
        assert isinstance(module.__loader__, ExtensionFileLoader), f"{module.__name__} runs as Python: {REBUILD}"
        (built,) = [p for p in (_file(module, s) for s in EXTENSION_SUFFIXES) if p.exists()]
        assert built.stat().st_mtime >= _source(module).stat().st_mtime, f"{built} is older than its source: {REBUILD}"


def _load(module: ModuleType, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, _source(module))
    assert spec is not None and spec.loader is not None
    out = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(out)
    return out


# The source as Python: the reader first, then the rules importing that reader (not the compiled one)
PY_VIEW = _load(saga_view, "saga_view_as_python")
with mock.patch.dict(sys.modules, {saga_view.__name__: PY_VIEW}):
    PY_RULES = _load(saga_rules, "saga_rules_as_python")


def test_the_python_twins_are_python() -> None:
    assert PY_VIEW.__file__ and PY_VIEW.__file__.endswith("saga_view.py")
    assert PY_RULES.__file__ and PY_RULES.__file__.endswith("saga_rules.py")
    assert PY_RULES.SagaView is PY_VIEW.SagaView and PY_RULES._spend is PY_VIEW._spend


@contextmanager
def _as_python() -> Iterator[None]:
    """validate_saga, both its paths (the JSON read directly, and the model's members), on the Python source."""
    checks = tuple((name, getattr(PY_RULES, check.__name__)) for name, check in saga_mod.SAGA_CHECKS)
    with (
        mock.patch.object(saga_mod, "_view_of_json", PY_VIEW._view_of_json),
        mock.patch.object(saga_mod, "_keys_and_ids", PY_RULES._keys_and_ids),
        mock.patch.object(saga_mod, "SAGA_CHECKS", checks),
    ):
        yield


def _outcome(run: Callable[[], Any]) -> Any:
    """What a call gives, or the exception it raises (its type and text), so that either can be compared."""
    try:
        return run()
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))


def _violations(doc: Any, now: datetime) -> Any:
    return _outcome(lambda: [v.to_dict() for v in saga_mod.validate_saga(doc, now)])


def _read(view: Any) -> Any:
    """Every member of a view, repr'd (250 and 250.0 differ), or None."""
    if view is None:
        return None
    return repr([(name, getattr(view, name)) for name in sorted(PY_VIEW.SagaView.__slots__)])


def _same(doc: Any, now: datetime) -> None:
    compiled = _violations(doc, now)
    read = _outcome(lambda: _read(saga_view._view_of_json(doc)))
    with _as_python():
        assert _violations(doc, now) == compiled
    assert _outcome(lambda: _read(PY_VIEW._view_of_json(doc))) == read


def test_the_compiled_rules_and_their_source_agree_on_every_fixture() -> None:
    for doc in FIXTURE_PLANS:
        for now in NOWS:
            _same(doc, now)


class _Int(int):
    pass


class _Float(float):
    pass


class _Str(str):
    pass


class _Dict(dict[str, Any]):
    pass


class _List(list[Any]):
    pass


# Where compiled and interpreted code could part: bool is an int, subclasses pass isinstance but not `type() is`,
# ints past 64 bits and past 2**53, signed zero, NaN, infinities, lone surrogates, containers of the wrong kind
_EDGES: list[Callable[[Any], Any]] = [
    lambda v: True,
    lambda v: False,
    lambda v: 2**63,
    lambda v: -(2**63) - 1,
    lambda v: 2**64 + 1,
    lambda v: 10**30,
    lambda v: 2**53,
    lambda v: 2**53 + 1,
    lambda v: -0.0,
    lambda v: math.nan,
    lambda v: math.inf,
    lambda v: 5e-324,
    lambda v: 2.0**53 + 2,
    lambda v: "\udc80",
    lambda v: "s\x00",
    lambda v: _Int(v) if type(v) is int else v,
    lambda v: _Float(v) if type(v) is float or (type(v) is int and abs(v) < 2**1000) else v,
    lambda v: _Str(v) if type(v) is str else v,
    lambda v: _Dict(v) if type(v) is dict else v,
    lambda v: _List(v) if type(v) is list else v,
    lambda v: float(v) if type(v) is int and abs(v) < 2**1000 else v,
    lambda v: int(v) if type(v) is float and math.isfinite(v) else v,
    lambda v: v + 2**64 if type(v) is int else v,
    lambda v: -v if type(v) in (int, float) else v,
    lambda v: (v,),
    lambda v: {1: v},
]


@st.composite
def edged_sagas(draw: st.DrawFn) -> Any:
    """A near-valid saga with one to three of its values (a member, the plan itself) swapped for an edge value."""
    doc = draw(near_valid_sagas())
    for _ in range(draw(st.integers(1, 3))):
        edge = draw(st.sampled_from(_EDGES))
        nodes = _nodes(doc)
        if not nodes or draw(st.integers(0, 20)) == 0:
            return edge(doc)
        container, key = draw(st.sampled_from(nodes))
        container[key] = edge(container[key])
    return doc


@settings(max_examples=1000, deadline=None)
@given(schema_valid_sagas(), st.sampled_from(NOWS))
def test_the_compiled_rules_and_their_source_agree_on_sagas_that_match_the_schema(doc: Any, now: datetime) -> None:
    _same(doc, now)


@settings(max_examples=1500, deadline=None)
@given(near_valid_sagas(), st.sampled_from(NOWS))
def test_the_compiled_rules_and_their_source_agree_on_near_valid_sagas(doc: Any, now: datetime) -> None:
    _same(doc, now)


@settings(max_examples=1500, deadline=None)
@given(edged_sagas(), st.sampled_from(NOWS))
def test_the_compiled_rules_and_their_source_agree_on_edge_values(doc: Any, now: datetime) -> None:
    _same(doc, now)


def test_the_comparison_sees_a_difference_between_the_two() -> None:
    """A planted difference (one message of the Python twin one space longer) is noticed: the comparison compares."""
    doc = saga()
    doc["steps"][2]["class"] = "retriable"  # a pivot-ordering violation
    longer = lambda rule, path, message: PY_RULES.Violation(rule=rule, path=path, message=message + " ")  # noqa: E731
    with mock.patch.object(PY_RULES, "violation", longer), pytest.raises(AssertionError):
        _same(doc, NOWS[0])
    _same(doc, NOWS[0])

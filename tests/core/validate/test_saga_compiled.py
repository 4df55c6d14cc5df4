"""The saga reader and rules (saga_view.py, saga_rules.py) as compiled by mypyc (setup.py), against their own source.

Here the compiled modules must be the ones imported: a build that silently fell back to Python (setup.py's fallback
for a machine without a C compiler) would be correct and slow, and one older than its source would run old code. And
compiled code is not quite Python (annotations are enforced, ints and floats are unboxed, a class is native), so the
source itself, loaded by path under other names as plain Python, must give what the compiled modules give: the same
violations (rule, path, message, order), the same values read, the same exceptions, on the fixtures, on generated
near-valid sagas and on values where compiled and interpreted Python could part (bools, subclasses, huge ints).
The check of the build, the loading and the comparison are tests/compiled.py's, shared with canonical JSON's test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.validate import saga as saga_mod
from hatp_mcp.core.validate import saga_rules, saga_view
from tests.compiled import build_problem, compiled_modules, edged, load_as_python, outcome
from tests.core.validate.test_saga import FIXTURE_PLANS, NOWS, near_valid_sagas, saga, schema_valid_sagas

COMPILED = (saga_view, saga_rules)


def test_the_saga_reader_and_rules_imported_here_are_the_compiled_ones_built_from_their_source() -> None:
    for module in COMPILED:
        assert module.__name__ in compiled_modules()
        problem = build_problem(module)
        assert problem is None, problem


# The source as Python: the reader first, then the rules importing that reader (not the compiled one)
PY_VIEW = load_as_python(saga_view, "saga_view_as_python")
with mock.patch.dict(sys.modules, {saga_view.__name__: PY_VIEW}):
    PY_RULES = load_as_python(saga_rules, "saga_rules_as_python")


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


def _violations(doc: Any, now: datetime) -> Any:
    return outcome(lambda: [v.to_dict() for v in saga_mod.validate_saga(doc, now)])


def _read(view: Any) -> Any:
    """Every member of a view, repr'd (250 and 250.0 differ), or None."""
    if view is None:
        return None
    return repr([(name, getattr(view, name)) for name in sorted(PY_VIEW.SagaView.__slots__)])


def _same(doc: Any, now: datetime) -> None:
    compiled = _violations(doc, now)
    read = outcome(lambda: _read(saga_view._view_of_json(doc)))
    with _as_python():
        assert _violations(doc, now) == compiled
    assert outcome(lambda: _read(PY_VIEW._view_of_json(doc))) == read


def test_the_compiled_rules_and_their_source_agree_on_every_fixture() -> None:
    for doc in FIXTURE_PLANS:
        for now in NOWS:
            _same(doc, now)


# A near-valid saga with one to three of its values (a member, the plan itself) swapped for an edge value
edged_sagas = edged(near_valid_sagas())


@settings(max_examples=1000, deadline=None)
@given(schema_valid_sagas(), st.sampled_from(NOWS))
def test_the_compiled_rules_and_their_source_agree_on_sagas_that_match_the_schema(doc: Any, now: datetime) -> None:
    _same(doc, now)


@settings(max_examples=1500, deadline=None)
@given(near_valid_sagas(), st.sampled_from(NOWS))
def test_the_compiled_rules_and_their_source_agree_on_near_valid_sagas(doc: Any, now: datetime) -> None:
    _same(doc, now)


@settings(max_examples=1500, deadline=None)
@given(edged_sagas, st.sampled_from(NOWS))
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

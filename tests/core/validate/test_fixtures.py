"""spec/fixtures/{hatp,saga}: every fixture gives its expected result, and switching off any one rule makes
exactly the fixtures that depend on it fail (a mutation test: no rule is dead, none is hidden by another)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.validate import saga as saga_mod
from hatp_mcp.core.validate import validator as validate_mod
from hatp_mcp.core.validate.validator import validate_document

FIXTURES = Path(__file__).resolve().parents[3] / "spec" / "fixtures"


def fixtures() -> list[Path]:
    return sorted(p for kind in ("hatp", "saga") for p in (FIXTURES / kind).glob("*.json") if ".expected" not in p.name)


def expected(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(path.with_name(path.stem + ".expected.json").read_text())
    return out


def result(path: Path) -> dict[str, Any]:
    exp = expected(path)
    report = validate_document(json.loads(path.read_text()), parse_ts(exp["now"]))
    return {
        "ok": report.ok,
        "kind": report.kind,
        "violations": [{"rule": v.rule, "path": v.path} for v in report.violations],
    }


def name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.mark.parametrize("path", fixtures(), ids=name)
def test_each_fixture_gives_its_expected_result(path: Path) -> None:
    exp = expected(path)
    assert result(path) == {k: exp[k] for k in ("ok", "kind", "violations")}
    assert exp["ok"] == path.stem.endswith(".valid")


def test_there_is_a_fixture_breaking_only_each_rule_and_the_required_valid_plans() -> None:
    only: dict[str, list[str]] = {}
    for path in fixtures():
        rules = {v["rule"] for v in expected(path)["violations"]}
        if len(rules) == 1:
            only.setdefault(rules.pop(), []).append(name(path))
    hatp_rules = {rule for rule, _ in validate_mod.HATP_CHECKS}
    saga_rules = {rule for rule, _ in saga_mod.SAGA_CHECKS}
    assert hatp_rules | saga_rules | {"schema"} <= set(only)
    names = {name(p) for p in fixtures()}
    assert {"hatp/trip.valid", "saga/supplier-onboarding.valid"} <= names
    assert len(json.loads((FIXTURES / "saga" / "supplier-onboarding.valid.json").read_text())["steps"]) == 6


def _depends_on(rule: str) -> set[str]:
    return {name(p) for p in fixtures() if any(v["rule"] == rule for v in expected(p)["violations"])}


def _failing() -> set[str]:
    out = set()
    for path in fixtures():
        exp = expected(path)
        if result(path) != {k: exp[k] for k in ("ok", "kind", "violations")}:
            out.add(name(path))
    return out


@pytest.mark.parametrize("rule", [r for r, _ in validate_mod.HATP_CHECKS])
def test_switching_off_a_hatp_rule_fails_exactly_the_fixtures_that_depend_on_it(
    rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = tuple(rc for rc in validate_mod.HATP_CHECKS if rc[0] != rule)
    monkeypatch.setattr(validate_mod, "HATP_CHECKS", kept)
    depends = _depends_on(rule)
    assert depends, f"no fixture exercises {rule}"
    assert _failing() == depends


@pytest.mark.parametrize("rule", [r for r, _ in saga_mod.SAGA_CHECKS])
def test_switching_off_a_saga_rule_fails_exactly_the_fixtures_that_depend_on_it(
    rule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = tuple(rc for rc in saga_mod.SAGA_CHECKS if rc[0] != rule)
    monkeypatch.setattr(saga_mod, "SAGA_CHECKS", kept)
    depends = _depends_on(rule)
    assert depends, f"no fixture exercises {rule}"
    assert _failing() == depends


def test_fixture_times_are_wire_timestamps() -> None:
    for path in fixtures():
        assert isinstance(parse_ts(expected(path)["now"]), datetime)

"""Wire models: strict, camelCase, unknown fields refused with their path, money exact, schemas generated."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.money import plan_money
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.wire import WireError, parse
from hatp_mcp.core.signing.canonical import digest
from tests.factories import trip_plan_json

ROOT = Path(__file__).resolve().parents[3]


def refuse(value: Any) -> WireError:
    with pytest.raises(WireError) as err:
        parse(Plan, value, "plan.json")
    return err.value


def test_a_trip_plan_parses_and_its_wire_form_is_a_fixed_point() -> None:
    plan = parse(Plan, trip_plan_json(), "plan.json")
    again = parse(Plan, plan.wire(), "again")
    assert again.wire() == plan.wire()
    assert again.digest() == plan.digest() == digest(plan.wire())


def test_the_plan_digest_is_sha256_of_the_normalized_wire_form_HATP_DIG_1() -> None:
    raw = trip_plan_json()
    raw["branches"][0]["amount"] = {"value": 400, "currency": "USD"}  # an integer value is kept as its string
    plan = parse(Plan, raw, "plan.json")
    assert plan.branches[0].amount == Amount(value="400", currency="USD")
    assert plan.digest().startswith("sha256:") and len(plan.digest()) == 71
    changed = copy.deepcopy(raw)
    changed["branches"][0]["amount"]["value"] = "400.01"
    assert parse(Plan, changed, "x").digest() != plan.digest()


def test_a_plan_digest_is_remembered_per_object_and_a_changed_copy_gets_its_own() -> None:
    plan = parse(Plan, trip_plan_json(), "plan.json")
    first = plan.digest()
    assert plan.digest() == first == digest(plan.wire())
    # a changed plan is a new object (model_copy): it never inherits the remembered digest
    changed = plan.model_copy(update={"summary": "something else"})
    assert changed.digest() == digest(changed.wire()) != first
    # equal content parsed separately digests alike
    assert parse(Plan, plan.wire(), "again").digest() == first


def test_plan_money_is_remembered_per_object_and_a_changed_copy_gets_its_own() -> None:
    plan = parse(Plan, trip_plan_json(), "plan.json")
    money = plan_money(plan)
    assert plan_money(plan) is money
    first = plan.branches[0]
    assert first.amount is not None
    dearer = first.model_copy(update={"amount": Amount.of(first.amount.decimal + 100, first.amount.currency)})
    changed = plan.model_copy(update={"branches": [dearer, *plan.branches[1:]]})
    cur = first.amount.currency
    assert plan_money(changed).totals[cur] == money.totals[cur] + 100
    totals, up_to = money.amounts()
    totals.clear()  # the lists handed out are the caller's own
    assert money.amounts()[0] != [] and money.amounts()[1] == up_to


def test_an_unknown_field_is_refused_with_its_json_path_HATP_OBJ_3() -> None:
    raw = trip_plan_json()
    raw["branches"][2]["surprise"] = True
    err = refuse(raw)
    assert err.rule == "HATP-OBJ-3"
    assert err.path == "branches[2].surprise"
    assert "unknown field" in err.reason


def test_wrong_types_are_refused_strictly_not_coerced_HATP_OBJ_3() -> None:
    raw = trip_plan_json()
    raw["branches"][0]["leaseSeconds"] = "900"
    err = refuse(raw)
    assert err.path == "branches[0].leaseSeconds"
    raw = trip_plan_json()
    del raw["requester"]
    assert refuse(raw).path == "requester"


def test_a_float_amount_is_refused_with_a_clear_error_HATP_AMT_1() -> None:
    raw = trip_plan_json()
    raw["branches"][1]["amount"]["value"] = 300.5
    err = refuse(raw)
    assert err.path == "branches[1].amount.value"
    assert "float" in err.reason and "decimal string" in err.reason


@pytest.mark.parametrize("value", ["1e5", "01.5", "1.", ".5", "1,000", "", "NaN", True])
def test_amount_values_must_be_plain_decimal_strings_HATP_AMT_1(value: object) -> None:
    with pytest.raises(WireError):
        parse(Amount, {"value": value, "currency": "USD"})


@pytest.mark.parametrize("currency", ["usd", "US", "USDT", "U$D"])
def test_a_currency_is_three_upper_case_letters_HATP_AMT_2(currency: str) -> None:
    with pytest.raises(WireError) as err:
        parse(Amount, {"value": "1", "currency": currency})
    assert err.value.path == "currency"


@pytest.mark.parametrize("ts", ["2026-11-29T10:00:00+00:00", "2026-11-29 10:00:00Z", "2026-11-29", "yesterday"])
def test_timestamps_are_rfc3339_utc_with_z_HATP_TS_1(ts: str) -> None:
    raw = trip_plan_json()
    raw["createdAt"] = ts
    assert refuse(raw).path == "createdAt"


def test_timestamps_round_trip_through_datetime() -> None:
    t = parse_ts("2026-11-29T10:00:00.5Z")
    assert format_ts(t) == "2026-11-29T10:00:00.5Z"
    with pytest.raises(ValueError, match="naive"):
        format_ts(t.replace(tzinfo=None))


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (datetime(2026, 11, 29, 12, 0, tzinfo=timezone(timedelta(hours=2))), "2026-11-29T10:00:00Z"),
        (datetime(2026, 11, 29, 10, 0, 0, 120000, tzinfo=UTC), "2026-11-29T10:00:00.12Z"),
        (datetime(2026, 11, 29, 10, 0, 0, 1, tzinfo=UTC), "2026-11-29T10:00:00.000001Z"),
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00Z"),  # four-digit year, or it would not parse back
    ],
)
def test_format_ts_writes_utc_with_z_and_parses_back(value: datetime, wire: str) -> None:
    assert format_ts(value) == wire
    assert parse_ts(wire) == value


def test_committed_json_schemas_match_the_models() -> None:
    from hatp_mcp.cli.schemas_cmd import generated

    on_disk = {p.name: p.read_text() for p in (ROOT / "spec" / "schemas").glob("*.schema.json")}
    assert on_disk == generated(), "spec/schemas drifted from the models: run `make schemas`"


def test_an_amount_copied_with_a_new_value_reports_the_new_value_HATP_AMT_1() -> None:
    # guards against caching the parsed decimal on the instance: pydantic's model_copy would carry a stale cache
    a = Amount(value="12.50", currency="USD")
    assert a.decimal == Decimal("12.50")
    b = a.model_copy(update={"value": "13"})
    assert b.decimal == Decimal("13")


@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        (("branches", 0, "branchId"), "seat\n", "branches[0].branchId"),
        (("approvals", 0, "id"), "finance\n", "approvals[0].id"),
        (("deadlines", "decideBy"), "2026-11-29T12:00:00Z\n", "deadlines.decideBy"),
        (("branches", 0, "amount", "value"), "600.00\n", "branches[0].amount.value"),
        (("txnId",), "txn-trip-0001\n", "txnId"),
    ],
)
def test_a_format_with_a_trailing_newline_is_refused_with_its_json_path_HATP_OBJ_3(
    where: tuple[Any, ...], value: str, path: str
) -> None:
    """Python's `$` also matches before a final newline: `"seat\\n"` passed as the identifier `seat` does not, and
    went into the digest as other bytes with the same meaning (two plans, one reading)."""
    raw = trip_plan_json()
    node = raw
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    err = refuse(raw)
    assert (err.rule, err.path) == ("HATP-OBJ-3", path)

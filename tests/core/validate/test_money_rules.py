"""hatp_mcp/core/validate/money_rules.py: signs, `settles`, approval amounts and mandate caps, per currency, exactly."""

from __future__ import annotations

from decimal import Decimal

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.money_rules import branch_most, plan_totals
from tests.core.validate.test_validator import branch, check, rules_and_paths, trip


def test_the_trip_total_counts_the_payer_once_with_tolerance_and_not_the_branches_it_settles() -> None:
    plan = Plan.model_validate(trip())
    assert plan_totals(plan) == {"USD": Decimal("999.09")}
    assert branch_most(plan.branch("seat")) == Decimal("420.75")
    assert branch_most(plan.branch("calendar")) is None


def test_a_negative_branch_amount_is_refused_HATP_VAL_5() -> None:
    plan = trip()
    branch(plan, "calendar")["amount"] = {"value": "-25.00", "currency": "USD"}
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-5", "branches[2].amount")]
    assert "-25.00" in out[0].message


def test_a_negative_tolerance_is_refused_HATP_VAL_5() -> None:
    plan = trip()
    branch(plan, "seat")["tolerancePercent"] = "-5"
    assert ("HATP-VAL-5", "branches[0].tolerancePercent") in rules_and_paths(check(plan))


def test_a_payer_that_charges_less_than_it_settles_hides_a_cost_HATP_VAL_6() -> None:
    plan = trip()
    branch(plan, "payment")["amount"]["value"] = "900.00"
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-6", "branches[3].amount")]
    assert "$987.75" in out[0].message and "$918.00" in out[0].message and "$69.75" in out[0].message


def test_settling_an_unknown_or_own_branch_is_refused_HATP_VAL_6() -> None:
    plan = trip()
    branch(plan, "payment")["settles"] = ["seat", "room", "payment", "taxi"]
    assert rules_and_paths(check(plan)) == [
        ("HATP-VAL-6", "branches[3].settles[2]"),
        ("HATP-VAL-6", "branches[3].settles[3]"),
    ]


def test_a_branch_settled_twice_is_refused_HATP_VAL_6() -> None:
    plan = trip()
    branch(plan, "calendar")["settles"] = ["seat"]
    out = [v for v in check(plan) if v.rule == "HATP-VAL-6"]
    assert ("HATP-VAL-6", "branches[3].settles[0]") in rules_and_paths(out)


def test_a_settles_cycle_that_would_drop_every_cost_is_refused_HATP_VAL_6() -> None:
    plan = trip()
    branch(plan, "payment")["settles"] = ["seat"]
    branch(plan, "seat")["settles"] = ["payment"]
    out = [v for v in check(plan) if v.rule == "HATP-VAL-6"]
    assert any("cycle" in v.message for v in out)


def test_a_payer_in_another_currency_settles_nothing_HATP_VAL_6() -> None:
    plan = trip()
    branch(plan, "payment")["amount"]["currency"] = "EUR"
    plan["approvals"][0].pop("maxAmount")
    plan["mandate"]["maxSpend"].append({"value": "2000", "currency": "EUR"})
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-6", "branches[3].amount")]
    assert "never converted" in out[0].message


def test_an_approval_below_the_plans_own_total_is_refused_HATP_VAL_7() -> None:
    plan = trip()
    plan["approvals"][0]["maxAmount"]["value"] = "999.08"
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-7", "approvals[0].maxAmount")]
    assert "$999.08" in out[0].message and "$999.09" in out[0].message


def test_an_approval_equal_to_the_total_with_tolerance_is_enough() -> None:
    plan = trip()
    plan["approvals"][0]["maxAmount"]["value"] = "999.09"
    assert check(plan) == []


def test_an_approval_in_one_currency_does_not_cover_spending_in_another_HATP_VAL_7() -> None:
    plan = trip()
    plan["branches"].append(
        {
            "branchId": "tourist-tax",
            "participant": "https://hotel.example/mcp",
            "operation": "tax.pay",
            "tier": "compensate",
            "amount": {"value": "6.00", "currency": "EUR"},
            "maxDurationSeconds": 1,
            "undoWindowSeconds": 3600,
            "compensation": {"operation": "tax.refund"},
        }
    )
    plan["mandate"]["maxSpend"].append({"value": "50", "currency": "EUR"})
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-7", "approvals[0].maxAmount")]
    assert "€6.00" in out[0].message and "drop it" in out[0].message


def test_a_plan_over_the_mandate_cap_is_refused_HATP_VAL_8() -> None:
    plan = trip()
    plan["mandate"]["maxSpend"][0]["value"] = "950.00"
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-8", "mandate.maxSpend")]
    assert "$999.09" in out[0].message and "$950.00" in out[0].message and "$49.09" in out[0].message


def test_a_currency_the_mandate_does_not_cap_is_not_allowed_HATP_VAL_8() -> None:
    plan = trip()
    plan["mandate"]["maxSpend"] = [{"value": "5000", "currency": "EUR"}]
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-8", "mandate.maxSpend")]
    assert "caps no spending in USD" in out[0].message


def test_a_ceiling_with_more_than_18_digits_on_a_side_is_refused_under_HATP_VAL_5() -> None:
    doc = trip()
    doc["branches"][0]["tolerancePercent"] = "0.000000000000000001"  # 412.50 x (1 + 1e-20): 22 decimals
    found = [v for v in check(doc) if v.rule == "HATP-VAL-5"]
    assert [v.path for v in found] == ["branches[0].tolerancePercent"]
    assert "more than 18 digits" in found[0].message
    doc["branches"][0]["tolerancePercent"] = "2.5"  # an ordinary tolerance still fits
    assert [v for v in check(doc) if v.rule == "HATP-VAL-5"] == []

"""core/validate/clockfit.py: the worst case before commit, per mode, in the plan's own numbers (HATP-VAL-11)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.clockfit import clock_fit
from tests.core.validate.test_validator import NOW, branch, check, trip


def fit_of(plan: dict[str, Any]) -> Any:
    return clock_fit(Plan.model_validate(plan), NOW)


def test_the_trip_plan_fits_every_mode_and_auto_chooses_parallel() -> None:
    fit = fit_of(trip())
    assert (fit.prepare.seconds, fit.commit.seconds, fit.human.seconds) == (80, 80, 9000)
    assert (fit.horizon, fit.tightest) == (21600, "seat")
    assert fit.worst == {"parallel": 9080, "holds-first": 9160, "approval-first": 160}
    assert fit.fits == ("parallel", "holds-first", "approval-first")
    assert fit.choose() == "parallel"
    assert fit.approval_window == 21600 - 160
    assert fit.undo_ok


def test_the_human_worst_case_is_the_escalation_chain_in_order_or_decide_by_whichever_is_shorter() -> None:
    plan = trip()
    plan["approvals"][0]["decideBy"] = format_ts(NOW + timedelta(seconds=3000))
    assert fit_of(plan).human.seconds == 3000
    plan["deadlines"]["decideBy"] = format_ts(NOW + timedelta(seconds=1200))
    assert fit_of(plan).human.seconds == 1200


def test_a_chain_link_without_an_sla_and_no_deadline_leaves_the_human_unbounded_naming_the_fields() -> None:
    plan = trip()
    del plan["approvals"][0]["chain"][1]["decideSeconds"]
    fit = fit_of(plan)
    assert fit.human.seconds is None
    assert fit.human.missing == (
        "approvals[0].chain[1].decideSeconds",
        "approvals[0].decideBy",
        "deadlines.decideBy",
    )
    assert fit.fits == ("approval-first",)


def test_an_empty_chain_is_unbounded_but_a_decide_by_bounds_it() -> None:
    plan = trip()
    plan["approvals"][0]["chain"] = []
    assert fit_of(plan).human.missing[0] == "approvals[0].chain"
    plan["approvals"][0]["decideBy"] = format_ts(NOW + timedelta(hours=1))
    assert fit_of(plan).human.seconds == 3600


def test_several_requirements_are_asked_at_once_so_the_slowest_counts() -> None:
    plan = trip()
    plan["approvals"].append(
        {
            "id": "travel",
            "address": "human://acme.com/erin",
            "action": "approve-travel",
            "chain": [{"address": "human://acme.com/erin", "decideSeconds": 12000}],
        }
    )
    assert fit_of(plan).human.seconds == 12000


def test_a_hold_without_a_horizon_is_held_only_for_its_lease() -> None:
    plan = trip()
    del branch(plan, "room")["holdHorizonSeconds"]
    fit = fit_of(plan)
    assert (fit.horizon, fit.tightest) == (3600, "room")
    assert fit.fits == ("approval-first",)


def test_equality_fits() -> None:
    plan = trip()
    branch(plan, "seat")["holdHorizonSeconds"] = 9080
    assert fit_of(plan).fits == ("parallel", "approval-first")
    branch(plan, "seat")["holdHorizonSeconds"] = 9079
    assert fit_of(plan).fits == ("approval-first",)


def test_holds_first_needs_prepare_human_and_commit_in_sequence_inside_the_horizon() -> None:
    plan = trip()
    branch(plan, "seat")["holdHorizonSeconds"] = 9160
    fit = fit_of(plan)
    assert fit.fits == ("parallel", "holds-first", "approval-first")
    assert fit.approval_window == 9000


def test_a_plan_without_holds_fits_every_mode_even_with_an_unbounded_human() -> None:
    plan = trip()
    plan["branches"] = [b for b in plan["branches"] if b["tier"] != "hold"]
    branch(plan, "payment")["settles"] = []
    plan["approvals"][0]["chain"] = []
    fit = fit_of(plan)
    assert fit.horizon is None and fit.fits == ("parallel", "holds-first", "approval-first")
    assert check(plan) == []


def test_an_unbounded_call_leaves_no_mode_and_marks_the_undo_windows_unproven_HATP_VAL_11() -> None:
    plan = trip()
    del branch(plan, "payment")["maxDurationSeconds"]
    fit = fit_of(plan)
    assert fit.prepare.missing == ("branches[3].maxDurationSeconds",)
    assert fit.fits == () and fit.choose() is None and not fit.undo_ok
    assert [v.rule for v in check(plan)] == ["HATP-VAL-11", "HATP-VAL-12"]


def test_a_past_decide_by_leaves_no_time_rather_than_negative_time() -> None:
    plan = trip()
    plan["approvals"][0]["decideBy"] = format_ts(NOW - timedelta(hours=1))
    assert fit_of(plan).human.seconds == 0

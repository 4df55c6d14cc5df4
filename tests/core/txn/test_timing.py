"""The coordinator's mode choice (from the validator's clock fit) and its commit order (pure)."""

from __future__ import annotations

import pytest

from demo.trip_world import trip_plan
from hatp_mcp.core.txn.timing import abort_order, choose_mode, commit_order, human_worst, mode_fits
from hatp_mcp.errors import HatpError
from tests.core.txn.test_machine import NOW


def test_commit_order_is_compensate_then_final_then_holds_and_abort_is_its_reverse() -> None:
    plan = trip_plan(NOW)
    assert commit_order(plan) == ["event", "pay", "seat", "room"]  # HATP-TXN-5
    assert abort_order(plan) == ["room", "seat", "pay", "event"]


def test_auto_mode_takes_the_first_mode_that_fits_and_refuses_when_none_does() -> None:
    assert choose_mode(trip_plan(NOW), NOW)[0] == "parallel"
    plan = trip_plan(NOW)
    unbounded = plan.model_copy(
        update={"branches": [b.model_copy(update={"max_duration_seconds": None}) for b in plan.branches]}
    )
    with pytest.raises(HatpError) as err:
        choose_mode(unbounded, NOW)
    assert (err.value.rule, err.value.code) == ("HATP-MODE-1", "MODE_DOES_NOT_FIT")


# The mode with the gateway's estimate: the worse of the plan's declared bound and the gateway's signed worst
# case, no estimate counting as unbounded (HATP-MODE-5/6).


def test_HATP_MODE_5_the_gateways_estimate_counts_when_it_is_worse_than_the_plans_bound() -> None:
    plan = trip_plan(NOW)  # chain 1800 + 1800, decideBy +3600: the plan says 3600
    assert choose_mode(plan, NOW)[0] == "parallel"
    assert human_worst(plan, NOW, {"finance": 60}) == 3600  # a shorter estimate never shortens the plan's bound
    mode, t = choose_mode(plan, NOW, {"finance": 20000})  # longer than the holds' 14400 s horizon
    assert (mode, t.approval_worst, t.fits) == ("approval-first", 20000, ("approval-first",))


def test_HATP_MODE_5_a_requirement_without_an_estimate_is_unbounded() -> None:
    plan = trip_plan(NOW)
    for estimates in ({}, {"finance": None}):
        mode, t = choose_mode(plan, NOW, estimates)
        assert (mode, t.approval_worst) == ("approval-first", None)
    assert mode_fits(10, 10, None, None) == ("parallel", "holds-first", "approval-first")  # nothing held


def test_HATP_MODE_6_an_explicit_mode_that_cannot_fit_with_the_gateways_estimate_is_refused_at_begin() -> None:
    plan = trip_plan(NOW, mode="parallel")
    assert choose_mode(plan, NOW, {"finance": 3600})[0] == "parallel"
    with pytest.raises(HatpError) as err:
        choose_mode(plan, NOW, {"finance": 20000})
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MODE-6", "MODE_DOES_NOT_FIT", "$.mode")
    assert "approver 20000s" in err.value.reason and "approval-first" in err.value.fix

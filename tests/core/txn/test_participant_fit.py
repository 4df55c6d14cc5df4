"""HATP-MODE-9 (core/txn/participant_fit.py): a plan that assumes more time than its participants offer is refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from demo.trip_world import trip_plan
from hatp_mcp.core.model.estimate import OperationBounds
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.txn.participant_fit import check_participant_bounds, with_participant_durations
from hatp_mcp.errors import HatpError

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def offered(plan: Plan, **override: Any) -> dict[str, OperationBounds]:
    """Each branch's bounds as generous as the plan assumes; `override` = {branchId: {field: value}}."""
    out = {}
    for b in plan.branches:
        fields: dict[str, Any] = {
            "max_lease_seconds": b.lease_seconds,
            "max_hold_seconds": b.hold_horizon_seconds,
            "max_duration_seconds": b.max_duration_seconds,
        }
        fields.update(override.get(b.branch_id, {}))
        out[b.branch_id] = OperationBounds(
            txn_id=plan.txn_id, branch_id=b.branch_id, operation=b.operation, tier=b.tier, **fields
        )
    return out


def refusal(plan: Plan, bounds: dict[str, OperationBounds], mode: str = "holds-first") -> HatpError:
    with pytest.raises(HatpError) as err:
        check_participant_bounds(plan, mode, bounds, NOW)
    return err.value


def test_HATP_MODE_9_a_plan_within_what_every_participant_offers_passes() -> None:
    plan = trip_plan(NOW)
    check_participant_bounds(plan, "holds-first", offered(plan, seat={"max_lease_seconds": None}), NOW)


def test_HATP_MODE_9_a_lease_or_hold_horizon_beyond_the_participants_is_refused() -> None:
    plan = trip_plan(NOW)
    lease = refusal(plan, offered(plan, seat={"max_lease_seconds": 600}))
    hold = refusal(plan, offered(plan, room={"max_hold_seconds": 3600}))
    assert (lease.rule, lease.code, lease.path) == ("HATP-MODE-9", "BOUNDS_EXCEEDED", "$.branches[0].leaseSeconds")
    assert "at most 600" in lease.reason
    assert (hold.rule, hold.code, hold.path) == ("HATP-MODE-9", "BOUNDS_EXCEEDED", "$.branches[1].holdHorizonSeconds")


def test_HATP_MODE_9_a_branch_without_bounds_or_with_bounds_for_another_operation_is_refused() -> None:
    plan = trip_plan(NOW)
    bounds = offered(plan)
    del bounds["pay"]
    missing = refusal(plan, bounds)
    other = offered(plan)
    other["event"] = other["event"].model_copy(update={"operation": "event.delete"})
    wrong = refusal(plan, other)
    assert (missing.rule, missing.code, missing.path) == ("HATP-MODE-9", "NO_BOUNDS", "$.branches[3]")
    assert (wrong.rule, wrong.code, wrong.path) == ("HATP-MODE-9", "EVIDENCE_MISMATCH", "$.branches[2].operation")


def test_HATP_MODE_9_no_max_duration_where_the_participant_states_one_is_refused() -> None:
    doc = trip_plan(NOW).wire()
    del doc["branches"][2]["maxDurationSeconds"]
    plan = Plan.model_validate(doc)
    err = refusal(plan, offered(plan, event={"max_duration_seconds": 30}))
    assert (err.rule, err.code, err.path) == ("HATP-MODE-9", "UNBOUNDED", "$.branches[2].maxDurationSeconds")


def test_HATP_MODE_9_the_clock_fit_takes_the_larger_call_duration_and_refuses_a_mode_that_no_longer_fits() -> None:
    plan = trip_plan(NOW)
    slow = offered(plan, pay={"max_duration_seconds": 20000})  # beyond every hold horizon
    assert with_participant_durations(plan, slow).branches[3].max_duration_seconds == 20000
    assert (
        with_participant_durations(plan, offered(plan, pay={"max_duration_seconds": 1}))
        .branches[3]
        .max_duration_seconds
        == 10
    )
    err = refusal(plan, slow)
    assert (err.rule, err.code) == ("HATP-MODE-9", "MODE_DOES_NOT_FIT")


def test_HATP_MODE_9_auto_is_chosen_again_with_the_participants_durations() -> None:
    plan = trip_plan(NOW)  # auto; the gateway's worst case 10,000 s of a 14,400 s hold horizon
    slow = offered(plan, pay={"max_duration_seconds": 5000})
    assert check_participant_bounds(plan, "parallel", offered(plan), NOW, {"finance": 10_000}) is None  # still fits
    again = check_participant_bounds(plan, "parallel", slow, NOW, {"finance": 10_000})
    assert again is not None
    mode, t = again
    assert mode == "approval-first" and "parallel" not in t.fits and t.commit is not None and t.commit >= 5000


def test_HATP_MODE_9_an_explicit_mode_that_no_longer_fits_is_refused_naming_the_ones_that_do() -> None:
    plan = Plan.model_validate({**trip_plan(NOW).wire(), "mode": "parallel"})
    with pytest.raises(HatpError) as err:
        check_participant_bounds(
            plan, "parallel", offered(plan, pay={"max_duration_seconds": 5000}), NOW, {"finance": 10_000}
        )
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-MODE-9", "MODE_DOES_NOT_FIT", "$.mode")
    assert "approval-first" in err.value.fix

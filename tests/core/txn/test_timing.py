"""The coordinator's mode choice (from the validator's clock fit) and its commit order (pure)."""

from __future__ import annotations

import pytest

from demo.trip_world import trip_plan
from hatp_mcp.core.txn.timing import abort_order, choose_mode, commit_order
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

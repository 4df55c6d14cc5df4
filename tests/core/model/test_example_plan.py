"""The example trip in another organisation (what a coordinator signing as that organisation's agent serves)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from hatp_mcp.core.model.example_plan import org_trip_plan
from hatp_mcp.core.validate.validator import validate


def test_the_example_trip_in_another_organisation_is_valid_and_names_only_that_organisation() -> None:
    now = datetime(2027, 3, 1, 8, 30, tzinfo=UTC)
    plan = org_trip_plan(now, "txn-org", "human://example.org/ann", "agent://example.org/claude")
    assert validate(plan, now) == [] and "acme.com" not in json.dumps(plan.wire())
    assert plan.approvals[0].address == "human://example.org/role/finance-approver"
    assert (plan.requester.principal, plan.requester.agent) == ("human://example.org/ann", "agent://example.org/claude")


def test_a_requester_that_is_no_person_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a human://ORG/NAME"):
        org_trip_plan(datetime(2027, 3, 1, tzinfo=UTC), "txn-org", "agent://example.org/claude", "agent://x/y")

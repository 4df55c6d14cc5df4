"""The in-process trip world (demo/trip_world.py): its plan declares what the organisation's cards say."""

from __future__ import annotations

from datetime import UTC, datetime

from demo.trip_world import trip_plan
from hatp_mcp.core.gateway.estimate import understated_links
from tests.acme_org import directory


def test_the_trip_plan_declares_the_approvers_real_slas_so_no_escalation_link_is_understated() -> None:
    plan = trip_plan(datetime(2026, 11, 29, 10, 0, tzinfo=UTC))
    chain = [(link.address, link.decide_seconds) for link in plan.approvals[0].chain]
    assert chain == [("human://acme.com/alice", 3600), ("human://acme.com/frank", 7200)]
    assert understated_links(plan, "finance", directory()) == []

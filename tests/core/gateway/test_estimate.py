"""The gateway's estimate (core/gateway/estimate.py): the worst case as the gateway routes and escalates, capped by the
deadline it signs; the plan's chain reported when it understates the cards, never trusted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from hatp_mcp.core.gateway.estimate import estimate_requirement, understated_links
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from tests.acme_org import GATEWAY_ID, directory, plan

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
ONE = "human://acme.com/role/finance-approver"


def est(p: Plan, rid: str = "finance") -> Any:
    return estimate_requirement(p, rid, directory(), gateway=GATEWAY_ID, now=NOW)


def with_chain(p: Plan, chain: list[dict[str, Any]]) -> Plan:
    doc = p.wire()
    doc["approvals"][0]["chain"] = chain
    return Plan.model_validate(doc)


def order(e: Any) -> list[tuple[str, int, int]]:
    return [(s.human.removeprefix("human://acme.com/"), s.asked_after_seconds, s.due_after_seconds) for s in e.order]


def test_HATP_GW_28_a_quorum_asked_at_once_is_bounded_by_its_slowest_persons_card_sla() -> None:
    e = est(plan(["25000"]))
    assert order(e) == [("bob", 0, 1800), ("carol", 0, 3600), ("frank", 0, 7200)]
    assert e.worst_seconds == 7200 and e.decide_by == "2026-11-29T14:00:00Z"
    assert (e.txn_id, e.requirement_id, e.plan_digest, e.gateway) == (
        "txn-acme-0001",
        "finance",
        plan(["25000"]).digest(),
        GATEWAY_ID,
    )


def test_HATP_GW_28_escalation_adds_each_replacements_sla_in_the_order_the_gateway_asks() -> None:
    e = est(plan(["5000"], address=ONE, decide_by="2026-11-29T18:00:00Z"))
    assert order(e) == [("bob", 0, 1800), ("alice", 1800, 5400), ("carol", 5400, 9000), ("frank", 9000, 16200)]
    assert e.worst_seconds == 16200


def test_HATP_GW_28_the_worst_case_never_exceeds_the_deadline_the_gateway_signs() -> None:
    e = est(plan(["5000"], address=ONE, decide_by="2026-11-29T11:00:00Z"))
    assert e.worst_seconds == 3600 and e.decide_by == "2026-11-29T11:00:00Z"
    assert order(e) == [("bob", 0, 1800), ("alice", 1800, 5400)]  # alice would run past it: capped


def test_HATP_GW_28_a_person_is_followed_by_their_delegate() -> None:
    e = est(plan(["5000"], address="human://acme.com/alice"))
    assert order(e) == [("alice", 0, 3600), ("bob", 3600, 5400)]
    assert e.order[1].delegate_for == "human://acme.com/alice" and e.worst_seconds == 5400


def test_HATP_GW_28_an_ask_exhausted_at_routing_estimates_zero() -> None:
    e = est(plan(["25000"], address="human://acme.com/alice"))  # alice's limit is 10,000, bob is not asked
    assert e.worst_seconds == 0 and e.order == []


def test_HATP_GW_28_a_requirement_the_gateway_would_refuse_has_no_estimate() -> None:
    with pytest.raises(HatpError) as exc:
        est(plan(["5000"]), "nope")
    assert exc.value.rule == "HATP-GW-11"
    with pytest.raises(HatpError) as exc:
        est(plan(["5000"], address="agent://acme.com/bot"))
    assert exc.value.rule == "HATP-ADDR-4"


def test_HATP_GW_29_a_chain_that_understates_a_named_persons_sla_is_reported_not_trusted() -> None:
    p = with_chain(
        plan(["5000"], address=ONE),
        [
            {"address": "human://acme.com/alice", "decideSeconds": 60},  # her card says 3600
            {"address": "human://acme.com/bob", "decideSeconds": 1800},  # honest
            {"address": "human://acme.com/role/finance-approver", "decideSeconds": 3600},  # frank takes 7200
            {"address": "human://acme.com/nobody", "decideSeconds": 10},
            {"address": "human://acme.com/carol"},  # no number: unbounded, honest
        ],
    )
    e = est(p)
    assert e.understated == [
        "approvals[0].chain[0].decideSeconds",
        "approvals[0].chain[2].decideSeconds",
        "approvals[0].chain[3].address",
    ]
    assert e.worst_seconds == est(plan(["5000"], address=ONE)).worst_seconds  # the chain changes nothing
    assert understated_links(p, "other", directory()) == []

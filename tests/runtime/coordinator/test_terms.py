"""The coordinator runtime with the gateway's estimate and approval terms, over in-memory participants and a
scripted approver on the fake clock (HATP-MODE-5..8)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.txn.events import Ask, Outcome, Tighten
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.scripted_approver import HumanScript, ScriptedApprover
from hatp_mcp.runtime.interfaces import ApproverAnswer
from tests.txn_helpers import bodies, drive

pytestmark = pytest.mark.anyio


def ts(start: datetime, seconds: int) -> str:
    return (start + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_HATP_MODE_5_begin_asks_the_gateways_estimate_and_runs_the_mode_that_fits_it(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(worst_seconds=20000)})
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    begin = bodies(result.record, "txn.begin")[0]
    assert (begin["mode"], begin["timing"]["approvalWorst"]) == ("approval-first", 20000)
    assert world.approver.calls[0] == ("estimate", "txn-trip-0001", "finance")


class _NoEstimate(ScriptedApprover):
    async def estimate(self, plan: Plan, requirement_id: str) -> object:  # type: ignore[override]
        raise HatpError("HATP-MCP-6", "no answer", code="TIMEOUT")


async def test_HATP_MODE_5_a_gateway_that_cannot_estimate_counts_as_unbounded(clock: FakeClock) -> None:
    world = build_world(clock)
    world.approver = _NoEstimate(world.keys["gateway"], clock)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert bodies(result.record, "txn.begin")[0]["mode"] == "approval-first"  # fail closed, never parallel
    assert result.outcome is Outcome.COMMITTED


async def test_HATP_MODE_6_an_explicit_mode_the_estimate_rules_out_is_refused_and_nothing_is_logged(
    clock: FakeClock,
) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(worst_seconds=20000)})
    with pytest.raises(HatpError) as err:  # begin refuses before anything runs
        await world.coordinator().run(trip_plan(clock.now(), mode="parallel"))
    assert (err.value.rule, err.value.code) == ("HATP-MODE-6", "MODE_DOES_NOT_FIT")
    assert await world.log.unfinished() == [] and world.seat.effects == []


async def test_HATP_MODE_7_holds_first_asks_under_the_holds_end_times_and_the_approval_carries_them(
    clock: FakeClock,
) -> None:
    world = build_world(clock, max_horizon_seconds=3000)
    start = clock.now()
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now(), mode="holds-first")))
    assert result.outcome is Outcome.COMMITTED
    asks = [c for _t, c in coord.trace if isinstance(c, Ask)]
    assert asks[0].terms is not None
    terms = asks[0].terms
    assert terms.decide_by == (start + timedelta(seconds=3000 - 25)).strftime("%Y-%m-%dT%H:%M:%SZ")
    lease, horizon = ts(start, 900), ts(start, 3000)  # the participants' signed receipts: 900 s lease, capped horizon
    assert [(h.branch_id, h.lease_expires_at, h.hold_horizon) for h in terms.holds] == [
        ("seat", lease, horizon),
        ("room", lease, horizon),
    ]
    approval = next(e["evidence"] for e in result.record["events"] if e["event"] == "approval")
    assert approval["terms"] == terms.wire()
    assert bodies(result.record, "approval.terms") == [{"requirementId": "finance", "terms": terms.wire()}]
    assert verify_record(result.record, world.keyring) == []


async def test_HATP_MODE_7_a_hold_that_returns_shorter_tightens_the_pending_ask(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=600)}, max_horizon_seconds=3000)
    start = clock.now()
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    tightened = [c for _t, c in coord.trace if isinstance(c, Tighten)]
    want = (start + timedelta(seconds=3000 - 25)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [t.terms.decide_by for t in tightened] == [want] and tightened[0].terms.holds == []
    assert world.approver.tightened[0][2] == tightened[0].terms
    approval = next(e["evidence"] for e in result.record["events"] if e["event"] == "approval")
    assert approval["terms"] == {"decideBy": want, "holds": []}


class _DropsTerms(ScriptedApprover):
    """A gateway that says it took the terms and approves without them."""

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        return await super().ask(plan, requirement_id)


async def test_HATP_MODE_8_an_approval_without_the_terms_sent_is_refused_and_the_transaction_aborts(
    clock: FakeClock,
) -> None:
    world = build_world(clock, max_horizon_seconds=3000)
    world.approver = _DropsTerms(world.keys["gateway"], clock)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now(), mode="holds-first")))
    assert result.outcome is Outcome.ABORTED
    refused = bodies(result.record, "evidence.refused")[0]
    assert (refused["rule"], refused["code"]) == ("HATP-MODE-8", "TERMS_MISMATCH")
    assert world.seat.effects[-1] == "release txn-trip-0001" and world.pay.effects == []

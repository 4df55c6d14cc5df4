"""The scripted approver signs as a gateway, is idempotent per (txnId, requirementId), and decides on cue."""

from __future__ import annotations

from datetime import timedelta

import pytest

from demo.trip_world import trip_plan
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.core.txn.evidence_checks import check_approver_answer
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.scripted_approver import SCRIPTED_GATEWAY, HumanScript, ScriptedApprover


@pytest.mark.anyio
async def test_a_scripted_human_is_pending_until_its_time_then_approves_for_good(clock: FakeClock) -> None:
    key = SigningKey.generate(["gateway"])
    ring = Keyring()
    ring.add_signer(key, SCRIPTED_GATEWAY)
    approver = ScriptedApprover(key, clock, scripts={"finance": HumanScript(after_seconds=60)})
    plan = trip_plan(clock.now())
    first = await approver.ask(plan, "finance")
    assert first.vote["decision"] == "pending" and first.approval is None
    check_approver_answer(plan, plan.digest(), "finance", first.vote, None, ring, clock.now())
    clock.advance(60)
    decided = await approver.poll(plan.txn_id, "finance")
    assert decided.vote["decision"] == "yes" and decided.approval is not None
    check_approver_answer(plan, plan.digest(), "finance", decided.vote, decided.approval, ring, clock.now())
    clock.advance(timedelta(hours=1).total_seconds())
    assert await approver.ask(plan, "finance") == decided  # idempotent: the same signed objects
    await approver.withdraw(plan.txn_id, "finance")
    assert [c[0] for c in approver.calls] == ["ask", "poll", "ask", "withdraw"]

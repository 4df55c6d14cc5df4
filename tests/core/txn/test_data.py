"""The machine's data (core/txn/data.py): a snapshot is independent of what happens after it, and restores it."""

from __future__ import annotations

from datetime import timedelta

from demo.trip_world import trip_plan
from hatp_mcp.core.evidence.keys import Keyring
from hatp_mcp.core.txn.data import Config, Txn, arm
from hatp_mcp.core.txn.events import Arm, TxnState
from hatp_mcp.core.txn.timing import timing
from tests.core.txn.test_machine import NOW


def test_a_snapshot_is_unchanged_by_later_writes_to_any_group_and_restore_puts_every_group_back() -> None:
    plan = trip_plan(NOW)
    t = Txn(plan, "parallel", timing(plan, NOW), Keyring(), Config())
    t.phase1.votes["seat"] = "yes"
    saved = t.snapshot()
    t.state = TxnState.ABORTING
    t.phase1.votes["seat"] = "no"
    t.phase1.inflight.add("room")
    t.holds.leases["room"] = NOW
    t.approvals.status["finance"] = "asked"
    t.approvals.asked = True
    t.phase2.abort_queue.append(("abort", "room"))
    t.phase2.decision = "abort"
    assert arm(t, "deadline", NOW + timedelta(seconds=5)) == [Arm(key="deadline", at=NOW + timedelta(seconds=5))]
    assert saved.phase1.votes == {"seat": "yes"} and not saved.phase1.inflight and not saved.timers
    t.restore(saved)
    assert t.state is TxnState.NEW and t.phase1.votes == {"seat": "yes"} and not t.phase1.inflight
    assert not t.holds.leases and not t.approvals.status and not t.approvals.asked
    assert not t.phase2.abort_queue and t.phase2.decision is None and not t.timers

"""The machine's data (core/txn/data.py): a snapshot is independent of what happens after it, and restores it."""

from __future__ import annotations

from dataclasses import fields
from datetime import timedelta

from demo.trip_world import trip_plan
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.data import Approvals, Config, Holds, Progress, Txn, Votes, arm
from hatp_mcp.core.txn.events import Arm, TxnState
from hatp_mcp.core.txn.machine import transition
from hatp_mcp.core.txn.timing import timing
from tests.core.txn.test_machine import NOW


def test_a_snapshot_is_unchanged_by_later_writes_to_any_group_and_restore_puts_every_group_back() -> None:
    plan = trip_plan(NOW)
    t = Txn(plan, "parallel", timing(plan, NOW), Keyring(), Config(), transition)
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


def _distinct(name: str, kind: object) -> object:
    """A value for field `name` that no other field holds, of the field's own kind."""
    if kind is dict:
        return {name: name}
    if kind is set:
        return {name}
    if kind is list:
        return [name]
    return f"value of {name}"


def test_each_group_copy_carries_every_field_to_itself_in_new_containers() -> None:
    # copy() builds each group positionally (cheaper per event than keywords): a field copied into its neighbour
    # would show here, as every field holds a value no other field holds
    for group in (Votes, Holds, Approvals, Progress):
        made = group()
        for f in fields(group):
            current = getattr(made, f.name)
            setattr(made, f.name, _distinct(f.name, type(current) if current is not None else None))
        copied = made.copy()
        assert type(copied) is group
        for f in fields(group):
            value, again = getattr(made, f.name), getattr(copied, f.name)
            assert again == value, (group.__name__, f.name)
            if isinstance(value, dict | set | list):
                assert again is not value, (group.__name__, f.name)  # a later write to one never reaches the other

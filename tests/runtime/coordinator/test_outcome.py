"""HATP-REC-17: the coordinator runtime refuses to close a record that does not justify its outcome. Each test
plants a machine bug (a machine that decides without the votes) and asserts nothing unjustified gets closed."""

from __future__ import annotations

from datetime import datetime

import anyio
import pytest

from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.txn.events import Command, Decide, Event, Finish, Outcome, Record, TxnState
from hatp_mcp.core.txn.machine import Coordinator
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator import driver as runtime_coordinator
from hatp_mcp.runtime.coordinator.driver import UnjustifiedOutcome
from hatp_mcp.runtime.coordinator.scripted_approver import HumanScript
from hatp_mcp.runtime.coordinator.service import TxnService
from tests.txn_helpers import drive

pytestmark = pytest.mark.anyio


class CommitsWithoutAsking(Coordinator):
    """A broken machine: commits at start without asking any participant or the human."""

    def handle(self, event: Event, now: datetime) -> list[Command]:
        self._d.state = TxnState.COMMITTED  # the planted bug: what the real machine would never do
        return [
            Record(event="txn.begin", body={"mode": self.mode}),
            Decide(decision="commit", reason="trust me"),
            Finish(outcome=Outcome.COMMITTED),
        ]


class AbortsForNoReason(Coordinator):
    """A broken machine: aborts at start and says nothing about why."""

    def handle(self, event: Event, now: datetime) -> list[Command]:
        self._d.state = TxnState.ABORTED
        return [
            Record(event="txn.begin", body={}),
            Decide(decision="abort", reason="?"),
            Finish(outcome=Outcome.ABORTED),
        ]


@pytest.mark.parametrize(
    ("machine", "rule"), [(CommitsWithoutAsking, "HATP-REC-11"), (AbortsForNoReason, "HATP-REC-14")]
)
async def test_HATP_REC_17_an_unjustified_outcome_is_never_closed(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch, machine: type[Coordinator], rule: str
) -> None:
    monkeypatch.setattr(runtime_coordinator, "Coordinator", machine)
    world = build_world(clock)
    with pytest.raises(BaseExceptionGroup) as caught:
        await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now(), "txn-bug")))
    refused = caught.value.exceptions[0]
    assert isinstance(refused, UnjustifiedOutcome) and refused.txn_id == "txn-bug"
    assert rule in {p["rule"] for p in refused.problems}
    logged = await world.log.load("txn-bug")
    assert logged is not None and not logged.closed  # left open for an operator, never closed
    assert [e["event"] for e in logged.events][-1] == "close.refused"
    assert logged.events[-1]["body"]["problems"] == refused.problems
    assert await world.log.unfinished() == ["txn-bug"]
    assert all(effects == [] for effects in world.effects().values())  # the broken machine sent nothing


async def test_HATP_REC_17_a_service_leaves_the_unjustified_transaction_open_and_keeps_serving(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runtime_coordinator, "Coordinator", CommitsWithoutAsking)
    world = build_world(clock)
    svc = TxnService(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=world.participants,
        approver=world.approver,
        log=world.log,
        clock=clock,
    )
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-bug"))
            status = await svc.wait("txn-bug")
            pending = await svc.pending()
    assert status.outcome is None and status.record is None and status.decision == "commit"
    assert [t.txn_id for t in pending.txns] == ["txn-bug"]
    err = capsys.readouterr().err
    assert "txn-bug left open" in err and "HATP-REC-11" in err


async def test_HATP_TXN_6_a_holds_only_trip_whose_second_commit_is_refused_needs_recovery_not_abort(
    clock: FakeClock,
) -> None:
    """Found by the close-time check (HATP-REC-15): without a final branch the holds commit one at a time; when
    the room's commit was refused after the seat was booked, the machine decided abort and finished ABORTED, though
    the seat stayed booked, and the coordinator left the record open. A booked hold has no undo: the machine now
    offers the room for recovery and the outcome is NEEDS_RECOVERY, closed and verifying."""
    world = build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=60)})
    data = trip_plan(clock.now(), "txn-holds").wire()
    data["branches"] = [b for b in data["branches"] if b["tier"] == "hold"]
    plan = Plan.model_validate(data)

    def room_changes(step: int) -> None:  # after the prepares, before the approval: the commit will be refused
        if step == 0:
            world.room.version = 2

    result = await drive(clock, lambda: world.coordinator().run(plan), on_step=room_changes)
    assert world.seat.effects == ["hold txn-holds", "book txn-holds"]  # the seat was booked
    assert result.outcome is Outcome.NEEDS_RECOVERY
    assert verify_record(result.record, world.keyring) == []
    events = [e["event"] for e in result.record["events"]]
    assert "decision" in events and events[-1] == "record.closed" and "close.refused" not in events

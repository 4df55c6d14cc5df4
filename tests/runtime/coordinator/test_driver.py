"""The coordinator runtime over in-memory participants and a scripted approver, on the fake clock."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import anyio
import pytest

from demo.trip_world import CalendarEvent, World, build_world, trip_plan
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.txn.events import Outcome, SendAbort, SendCommit, SendCompensate
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import TxnResult
from hatp_mcp.runtime.coordinator.scripted_approver import HumanScript
from hatp_mcp.store.txn_log import MemoryTxnLog
from tests.txn_helpers import bodies, drive, events, receipts


def sent(world_coord: Any, kind: type) -> list[str]:
    return [c.branch_id for _t, c in world_coord.trace if isinstance(c, kind)]


@pytest.mark.anyio
async def test_the_trip_commits_compensate_then_final_then_holds_and_its_record_verifies_HATP_TXN_15_HATP_TXN_5(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    # HATP-TXN-5: compensate branches, then the final branch, then the holds
    assert [r["branchId"] for r in receipts(result.record, "commit")] == ["event", "pay", "seat", "room"]
    assert events(result.record)[0] == "txn.begin" and events(result.record)[-1] == "record.closed"
    assert verify_record(result.record, world.keyring) == []  # HATP-TXN-15
    assert world.effects() == {
        "seat": ["hold txn-trip-0001", "book txn-trip-0001"],
        "room": ["hold txn-trip-0001", "book txn-trip-0001"],
        "event": ["create txn-trip-0001"],
        "pay": ["capture txn-trip-0001"],
    }


@pytest.mark.anyio
async def test_a_tampered_copy_of_a_produced_record_fails_verification(clock: FakeClock) -> None:
    world = build_world(clock)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    tampered = copy.deepcopy(result.record)
    decision = next(e for e in tampered["events"] if e["event"] == "decision")
    decision["body"]["decision"] = "abort"
    rules = {p.rule for p in verify_record(tampered, world.keyring)}
    assert "HATP-SIG-4" in rules and "HATP-REC-2" in rules  # HATP-TXN-15
    cut = copy.deepcopy(result.record)
    del cut["events"][-3]
    assert {p.rule for p in verify_record(cut, world.keyring)} >= {"HATP-REC-1", "HATP-REC-2"}


@pytest.mark.anyio
async def test_a_sold_out_hotel_aborts_and_releases_the_seat_in_reverse_commit_order(clock: FakeClock) -> None:
    world = build_world(clock)
    world.room.sold_out = True
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.ABORTED
    assert bodies(result.record, "decision")[0]["reason"].startswith("SOLD_OUT")
    # HATP-TXN-5: reverse of (event, pay, seat, room), skipping the room that voted no
    assert sent(coord, SendAbort) == ["seat", "pay", "event"]
    assert sent(coord, SendCommit) == []
    assert world.seat.effects == ["hold txn-trip-0001", "release txn-trip-0001"]
    assert verify_record(result.record, world.keyring) == []


class ProbeCalendar(CalendarEvent):
    """Looks at the coordinator's durable log at the moment its commit arrives."""

    def __init__(self, log: MemoryTxnLog) -> None:
        super().__init__()
        self.log = log
        self.seen: list[str | None] = []

    async def perform(self, txn_id: str, branch: Branch, now: Any, *, key: str) -> str | None:
        logged = await self.log.load(txn_id)
        self.seen.append(logged.decision if logged else None)
        assert logged is not None
        self.seen.append(logged.events[-1]["event"])
        return await super().perform(txn_id, branch, now, key=key)


@pytest.mark.anyio
async def test_the_decision_is_durable_before_the_first_commit_is_sent(clock: FakeClock) -> None:
    log = MemoryTxnLog()
    world = build_world(clock, log=log)
    probe = ProbeCalendar(log)
    world.participants["mcp://calendar.example/hatp"]._ops["event.create"] = probe
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    assert probe.seen == ["commit", "decision"]  # HATP-TXN-4


class ProbeUndo(CalendarEvent):
    """Looks at the coordinator's durable log at the moment the compensation arrives."""

    def __init__(self, log: MemoryTxnLog) -> None:
        super().__init__()
        self.log = log
        self.seen: list[str] = []

    async def undo(self, txn_id: str, branch: Branch, undo_token: str | None, now: Any, *, key: str) -> None:
        logged = await self.log.load(txn_id)
        assert logged is not None
        self.seen = [f"{e['event']}:{e['body'].get('branchId', e['body'].get('decision'))}" for e in logged.events]
        await super().undo(txn_id, branch, undo_token, now, key=key)


@pytest.mark.anyio
async def test_a_deferred_receipt_is_durable_before_the_compensation_it_leads_to(clock: FakeClock) -> None:
    # HATP-TXN-4: the calendar's commit receipt may wait for the next forced write, but the abort decision is one,
    # and it carries every record before it: the compensation never goes out ahead of what it undoes
    log = MemoryTxnLog()
    world = build_world(clock, log=log)
    world.pay.decline = True
    probe = ProbeUndo(log)
    world.participants["mcp://calendar.example/hatp"]._ops["event.create"] = probe
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.ABORTED
    assert probe.seen[-6:-3] == ["commit:event", "commit:pay", "decision:abort"], probe.seen
    assert sorted(probe.seen[-3:]) == ["abort:pay", "abort:room", "abort:seat"]  # released before it (HATP-TXN-5)


@pytest.mark.anyio
async def test_records_are_made_durable_once_no_participant_call_is_in_flight(clock: FakeClock) -> None:
    # HATP-TXN-4: the votes wait for no forced write while the human takes ten minutes: as soon as every
    # participant has answered, they are durable (checked before the clock first moves)
    log = _BatchLog()
    world = build_world(clock, log=log, scripts={"finance": HumanScript(after_seconds=600)})
    durable_at_first_wait: list[str] = []

    def look(i: int) -> None:
        if i == 0:
            durable_at_first_wait.extend(e for batch in log.batches for e in batch)

    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())), on_step=look)
    assert result.outcome is Outcome.COMMITTED
    assert {f"vote:{b}" for b in ("seat", "room", "event", "pay")} <= set(durable_at_first_wait)
    assert "decision:None" not in durable_at_first_wait


@pytest.mark.anyio
async def test_an_invalid_plan_is_refused_at_begin_and_nothing_is_logged_or_called(clock: FakeClock) -> None:
    world = build_world(clock)
    past = (clock.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plan = trip_plan(clock.now(), deadlines={"decideBy": past})
    with pytest.raises(HatpError) as err:
        await world.coordinator().run(plan)
    assert err.value.rule == "HATP-TXN-1" and err.value.code == "PLAN_INVALID"
    assert any(v["rule"] == "HATP-VAL-9" for v in err.value.data["violations"])  # type: ignore[union-attr]
    assert await world.log.unfinished() == []
    assert world.approver.calls == [] and world.seat.effects == []


@pytest.mark.anyio
async def test_a_precondition_change_aborts_undoes_what_ran_and_never_retries_HATP_TXN_6(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=60)})
    coord = world.coordinator()

    def card_changes(step: int) -> None:
        world.pay.version = 2  # the card was replaced while the human decided

    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())), on_step=card_changes)
    assert result.outcome is Outcome.ABORTED
    refused = [r for r in receipts(result.record, "commit") if r["outcome"] == "refused"]
    assert [(r["branchId"], r["code"]) for r in refused] == [("pay", "PRECONDITION_CHANGED")]  # HATP-PART-5
    assert sent(coord, SendCommit) == ["event", "pay"]  # HATP-TXN-6: no retry with new values
    assert sent(coord, SendCompensate) == ["event"]
    assert world.event.effects == ["create txn-trip-0001", "delete evt-txn-trip-0001"]
    assert world.pay.effects == [] and world.seat.effects[-1] == "release txn-trip-0001"
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
@pytest.mark.parametrize("tier", ["compensate", "final", "hold"])
async def test_a_commit_refused_at_each_tier_HATP_TXN_6(clock: FakeClock, tier: str) -> None:
    world = build_world(clock)
    if tier == "compensate":
        world.event.perform = _refuse  # type: ignore[method-assign]
    elif tier == "final":
        world.pay.decline = True
    else:
        world.room.perform = _refuse  # type: ignore[method-assign]
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    if tier == "compensate":  # nothing ran: release everything
        assert result.outcome is Outcome.ABORTED and sent(coord, SendCompensate) == []
        assert sent(coord, SendAbort) == ["room", "seat", "pay", "event"]
    elif tier == "final":  # HATP-TXN-6: the calendar event that ran is compensated
        assert result.outcome is Outcome.ABORTED and sent(coord, SendCompensate) == ["event"]
        assert world.pay.effects == []
    else:  # after the irreversible step nothing can abort: recovery is offered
        assert result.outcome is Outcome.NEEDS_RECOVERY
        assert bodies(result.record, "recovery.offered")[0]["branches"] == ["room"]
        assert world.pay.effects == ["capture txn-trip-0001"]
    assert verify_record(result.record, world.keyring) == []


async def _refuse(*args: Any, **kwargs: Any) -> str | None:
    raise HatpError("HATP-PART-6", "the supplier refused", code="SUPPLIER_REFUSED")


@pytest.mark.anyio
async def test_a_pending_approval_is_polled_until_the_human_decides_HATP_TXN_7(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=600)})
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    polls = [c for c in world.approver.calls if c[0] == "poll"]
    assert len(polls) >= 600 // 30 - 1  # HATP-TXN-7
    votes = [e["evidence"]["decision"] for e in result.record["events"] if e["body"].get("branchId") == "finance"]
    assert votes == ["pending", "yes"]
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
async def test_no_decision_by_the_deadline_aborts_and_withdraws_the_ask_HATP_TXN_7(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(decision="never")})
    start = clock.now()
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.ABORTED
    assert bodies(result.record, "decision")[0]["reason"].startswith("APPROVAL_TIMEOUT")  # HATP-TXN-7
    timeout = next(e for e in result.record["events"] if e["event"] == "approval.timeout")
    assert timeout["body"]["decideBy"] == (start + timedelta(seconds=3600)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ("withdraw", "txn-trip-0001", "finance") in world.approver.calls
    assert world.seat.effects[-1] == "release txn-trip-0001" and world.room.effects[-1] == "release txn-trip-0001"


@pytest.mark.anyio
async def test_holds_capped_below_what_was_asked_are_renewed_while_the_human_decides_HATP_TXN_8(
    clock: FakeClock,
) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=1500)}, max_lease_seconds=300)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    prepared = [r for r in receipts(result.record, "prepare") if r["branchId"] == "seat"]
    assert prepared[0]["leaseExpiresAt"] == "2026-11-29T10:05:00Z"  # HATP-PART-1: capped at 300 s, not 900
    renewals = [r for r in receipts(result.record, "renew") if r["branchId"] == "seat"]
    assert len(renewals) >= 1500 // 300  # HATP-TXN-8
    assert world.seat.effects == ["hold txn-trip-0001", "book txn-trip-0001"]


@pytest.mark.anyio
async def test_a_shorter_hold_horizon_shrinks_the_approval_deadline_HATP_TXN_8(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(decision="never")}, max_horizon_seconds=2000)
    start = clock.now()
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    deadlines = [b["decideBy"] for b in bodies(result.record, "approval.deadline")]
    # HATP-TXN-8: the holds end at +2000 s, the commit needs 25 s: the human must decide by +1975 s
    assert deadlines[-1] == (start + timedelta(seconds=1975)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert result.outcome is Outcome.ABORTED
    assert bodies(result.record, "approval.timeout")[0]["decideBy"] == deadlines[-1]


def lose_the_seat_hold_once(world: World, clock: FakeClock) -> None:
    airline = world.participants["mcp://airline.example/hatp"]
    original = airline.renew

    async def renew(req: Any) -> Any:
        if not getattr(renew, "done", False):
            renew.done = True  # type: ignore[attr-defined]
            row = airline.store.get(req.txn_id, req.branch_id)
            assert row is not None and row.lease is not None
            row.lease = type(row.lease)(clock.now() - timedelta(seconds=1), row.lease.horizon)
            airline.store.put(row)  # the airline dropped the hold
        return await original(req)

    airline.renew = renew  # type: ignore[method-assign]


@pytest.mark.anyio
async def test_a_lost_hold_is_placed_again_without_asking_the_human_twice_HATP_TXN_8(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=1200)})
    lose_the_seat_hold_once(world, clock)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    assert events(result.record).count("hold.lost") == 1
    assert bodies(result.record, "hold.replaced") == [{"branchId": "seat", "askedHumanAgain": False}]  # HATP-TXN-8
    assert [c[0] for c in world.approver.calls].count("ask") == 1
    assert world.seat.effects == ["hold txn-trip-0001", "hold txn-trip-0001", "book txn-trip-0001"]
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
async def test_a_hold_that_cannot_be_placed_again_aborts_before_any_commit_HATP_TXN_8(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=1200)})
    lose_the_seat_hold_once(world, clock)
    world.seat.sold_out = True  # the seat went to someone else meanwhile
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.ABORTED  # HATP-TXN-8
    assert receipts(result.record, "commit") == []
    assert world.room.effects == ["hold txn-trip-0001", "release txn-trip-0001"]


@pytest.mark.anyio
async def test_every_short_lease_is_renewed_before_a_commit_step_HATP_TXN_9(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=120)}, max_lease_seconds=300)
    coord = world.coordinator(Config(coordinator="coordinator://acme.com/c1", renew_before_seconds=200))
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    names = events(result.record)
    first_commit = names.index("commit")
    between = [
        e["body"]["branchId"]
        for e in result.record["events"][names.index("decision") : first_commit]
        if e["event"] == "renew"
    ]
    assert sorted(between) == ["room", "seat"]  # HATP-TXN-9


@pytest.mark.anyio
async def test_a_final_commit_that_times_out_is_in_doubt_and_a_late_yes_commits_the_holds_HATP_TXN_10_HATP_TXN_11(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    world.pay.hang = 1
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())), step_seconds=5)
    assert result.outcome is Outcome.COMMITTED
    assert "commit.in-doubt" in events(result.record) and "commit.retry" in events(result.record)  # HATP-TXN-10
    resolved = bodies(result.record, "in-doubt.resolved")
    assert resolved == [{"branchId": "pay", "answer": "yes", "holdsLive": ["seat", "room"], "holdsLapsed": []}]
    assert world.pay.effects == ["capture txn-trip-0001"]  # HATP-TXN-11
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
async def test_an_in_doubt_commit_is_durable_before_it_is_retried(clock: FakeClock) -> None:
    # HATP-TXN-4: between the timeout and the retry no participant call is in flight, so the in-doubt state (and the
    # calendar's receipt that waited) are durable, visible in the status, before the retry goes out
    log = MemoryTxnLog()
    world = build_world(clock, log=log)
    world.pay.hang = 1
    durable_at_retry: list[str] = []
    capture = world.pay.perform

    async def perform(txn_id: str, branch: Branch, now: Any, *, key: str) -> str | None:
        if world.pay.hang == 0:  # the retry
            logged = await log.load(txn_id)
            assert logged is not None
            durable_at_retry.extend(e["event"] for e in logged.events)
        return await capture(txn_id, branch, now, key=key)

    world.pay.perform = perform  # type: ignore[method-assign]
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())), step_seconds=5)
    assert result.outcome is Outcome.COMMITTED
    assert "commit.in-doubt" in durable_at_retry and "commit" in durable_at_retry  # the calendar's receipt too


@pytest.mark.anyio
async def test_a_late_no_after_in_doubt_aborts_and_compensates(clock: FakeClock) -> None:
    world = build_world(clock)
    world.pay.hang = 1
    world.pay.decline = True
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())), step_seconds=5)
    assert result.outcome is Outcome.ABORTED
    assert bodies(result.record, "in-doubt.resolved")[0]["answer"] == "no"  # HATP-TXN-11
    assert sent(coord, SendCompensate) == ["event"] and sent(coord, SendAbort) == ["room", "seat", "pay"]


@pytest.mark.anyio
async def test_escalation_comes_lead_seconds_before_the_first_hold_horizon_and_recovery_is_only_offered(
    clock: FakeClock,
) -> None:
    world = build_world(clock, max_horizon_seconds=3600)
    world.pay.hang = 11  # the payment provider stays silent past the holds' horizon (11 tries, 310 s apart)
    start = clock.now()
    coord = world.coordinator(Config(coordinator="coordinator://acme.com/c1", retry_seconds=300))
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())), step_seconds=50)
    arms = [c.at for _t, c in coord.trace if getattr(c, "key", "") == "escalate"]
    assert arms == [start + timedelta(seconds=3600 - 900)]  # HATP-TXN-10
    assert len(world.escalations) == 1 and world.escalations[0][1] == "human://acme.com/role/ops-oncall"
    resolved = bodies(result.record, "in-doubt.resolved")[0]
    assert resolved["answer"] == "yes" and resolved["holdsLapsed"] == ["seat", "room"]
    offer = bodies(result.record, "recovery.offered")[0]  # HATP-TXN-11
    assert offer["performed"] is False and offer["offSessionReauth"] == {"consented": False}
    assert result.outcome is Outcome.NEEDS_RECOVERY
    assert world.seat.effects == ["hold txn-trip-0001"]  # never booked, never re-held by the coordinator
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
async def test_approval_first_quotes_then_asks_then_places_the_holds_HATP_MODE_3(clock: FakeClock) -> None:
    world = build_world(clock)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now(), mode="approval-first")))
    assert result.outcome is Outcome.COMMITTED
    kinds = [
        (e["event"], e["evidence"].get("phase", e["evidence"].get("decision")))
        for e in result.record["events"]
        if e.get("evidence") and e["event"] in ("receipt", "approval")
    ]
    approval_at = kinds.index(("approval", "approve"))
    assert [k for k in kinds[:approval_at] if k[1] == "quote"] == [("receipt", "quote")] * 2  # HATP-MODE-3
    assert [k for k in kinds[approval_at:] if k[0] == "receipt"] == [("receipt", "prepare")] * 2
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
async def test_an_approval_after_the_quotes_expired_aborts_HATP_MODE_3(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=1200)})
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now(), mode="approval-first")))
    assert result.outcome is Outcome.ABORTED
    assert bodies(result.record, "decision")[0]["reason"].startswith("QUOTE_EXPIRED")  # HATP-MODE-3
    assert world.seat.effects == [] and world.room.effects == []


@pytest.mark.anyio
async def test_holds_first_places_the_holds_then_asks_with_a_deadline_inside_them_HATP_MODE_4(clock: FakeClock) -> None:
    world = build_world(clock, max_horizon_seconds=3000)
    start = clock.now()
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now(), mode="holds-first")))
    assert result.outcome is Outcome.COMMITTED
    names = [type(c).__name__ for _t, c in coord.trace]
    assert names.index("Ask") > max(i for i, n in enumerate(names) if n == "SendPrepare")  # HATP-MODE-4
    names = events(result.record)
    deadline = [
        e["body"] for e in result.record["events"][: names.index("approval")] if e["event"] == "approval.deadline"
    ]
    assert deadline[-1]["decideBy"] == (start + timedelta(seconds=3000 - 25)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.anyio
async def test_an_escalation_hook_that_fails_does_not_stop_the_transaction(clock: FakeClock) -> None:
    from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime

    world = build_world(clock, max_horizon_seconds=3600)
    world.pay.hang = 11

    async def broken(txn_id: str, to: str, reason: str) -> None:
        raise RuntimeError("the pager is down")

    coord = CoordinatorRuntime(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=dict(world.participants),
        approver=world.approver,
        log=world.log,
        clock=clock,
        config=Config(retry_seconds=300),
        on_escalate=broken,
        keep_trace=True,
    )
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())), step_seconds=50)
    assert "escalated" in events(result.record)  # HATP-TXN-10: recorded even though the hook failed
    assert result.outcome is Outcome.NEEDS_RECOVERY
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
async def test_a_pending_participant_is_asked_again_until_it_votes_yes_HATP_PART_9_HATP_TXN_16(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    world.pay.pending_until = clock.now() + timedelta(seconds=100)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    pay_votes = [
        e["evidence"] for e in result.record["events"] if e["event"] == "vote" and e["body"]["branchId"] == "pay"
    ]
    assert [v["decision"] for v in pay_votes] == ["pending", "yes"]  # HATP-TXN-16
    assert pay_votes[0]["decideBy"] == "2026-11-29T10:01:40Z"  # HATP-PART-9: signed deadline
    pending_receipt = next(r for r in receipts(result.record, "prepare") if r["branchId"] == "pay")
    assert (pending_receipt["outcome"], pending_receipt["code"]) == ("in-doubt", "PENDING")
    assert verify_record(result.record, world.keyring) == []


@pytest.mark.anyio
async def test_a_participant_still_pending_at_its_deadline_aborts_the_transaction_HATP_TXN_16(clock: FakeClock) -> None:
    world = build_world(clock)
    world.pay.pending_until = clock.now() + timedelta(seconds=600)
    world.pay.promised_by = clock.now() + timedelta(seconds=300)  # it promised less than it needs
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.ABORTED
    assert bodies(result.record, "vote.timeout") == [{"branchId": "pay", "decideBy": "2026-11-29T10:05:00Z"}]
    assert bodies(result.record, "decision")[0]["reason"].startswith("VOTE_TIMEOUT")  # HATP-TXN-16
    assert receipts(result.record, "commit") == []
    assert world.seat.effects[-1] == "release txn-trip-0001"


@pytest.mark.anyio
async def test_the_approval_deadline_leaves_room_to_commit_by_the_plans_commit_by_HATP_TXN_7(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript(after_seconds=1200)})
    at = (clock.now() + timedelta(seconds=1000)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plan = trip_plan(clock.now(), deadlines={"decideBy": at, "commitBy": at})
    plan = plan.model_copy(update={"approvals": [a.model_copy(update={"decide_by": at}) for a in plan.approvals]})
    result = await drive(clock, lambda: world.coordinator().run(plan))
    deadline = bodies(result.record, "approval.deadline")[-1]["decideBy"]
    assert deadline == (clock.now().replace(hour=10, minute=0, second=0) + timedelta(seconds=975)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )  # HATP-TXN-7: commitBy minus the 25 s commit phase
    assert result.outcome is Outcome.ABORTED and receipts(result.record, "commit") == []


class _BatchLog(MemoryTxnLog):
    """Remembers what each durable append carried: `event:branchId` per record event."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.forced: list[bool] = []  # per append: fsynced, or only written (HATP-STORE-8)

    async def append(self, txn_id: str, entries: Any, forced: bool = True) -> None:
        self.forced.append(forced)
        self.batches.append(
            [f"{e.payload.get('event', e.kind)}:{e.payload.get('body', {}).get('branchId')}" for e in entries]
        )
        await super().append(txn_id, entries, forced)


@pytest.mark.anyio
async def test_answers_that_arrive_together_are_made_durable_in_one_append(
    clock: FakeClock,
) -> None:
    log = _BatchLog()
    world = build_world(clock, log=log)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    # HATP-TXN-4: the four prepare answers and the decision that follows from them are one durable write
    decided = next(b for b in log.batches if "decision:None" in b)
    assert {f"vote:{b}" for b in ("seat", "room", "event", "pay")} <= set(decided)
    # begin, the approver, the prepares with the decision, the calendar, the payment, both holds with the close
    assert len(log.batches) <= 6 and "record.closed:None" in log.batches[-1]
    assert {"commit:seat", "commit:room"} <= set(log.batches[-1])  # HATP-TXN-5: the holds commit together


@pytest.mark.anyio
async def test_HATP_TXN_25_the_outcome_is_recorded_as_decided_once_the_final_committed_before_the_holds_are_sent(
    clock: FakeClock,
) -> None:
    log = _BatchLog()
    world = build_world(clock, log=log)
    coord = world.coordinator()
    told: list[Outcome] = []
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now()), on_decided=told.append))
    assert result.outcome is Outcome.COMMITTED and told == [Outcome.COMMITTED]
    names = events(result.record)
    assert names.count("outcome.decided") == 1
    # after the payment's (the final branch's) commit receipt, before the holds' receipts
    pay = next(
        i for i, e in enumerate(result.record["events"]) if e["event"] == "commit" and e["body"]["branchId"] == "pay"
    )
    assert pay < names.index("outcome.decided") < len(names) - 3
    assert bodies(result.record, "outcome.decided") == [{"outcome": "COMMITTED", "confirming": ["seat", "room"]}]
    # durable in its own write, with the payment's receipt, before either hold's commit was sent
    told_in = next(i for i, b in enumerate(log.batches) if "outcome.decided:None" in b)
    assert "commit:pay" in log.batches[told_in] and "record.closed:None" in log.batches[-1]
    order = [(type(c).__name__, getattr(c, "branch_id", getattr(c, "event", None))) for _t, c in coord.trace]
    assert order.index(("Record", "outcome.decided")) < order.index(("SendCommit", "seat"))


@pytest.mark.anyio
async def test_HATP_TXN_25_an_aborted_trip_is_never_recorded_as_decided_before_its_close(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript("reject")})
    told: list[Outcome] = []
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now()), on_decided=told.append))
    assert result.outcome is Outcome.ABORTED and told == [Outcome.ABORTED]
    assert "outcome.decided" not in events(result.record)


TXN = "txn-trip-0001"  # trip_plan's


class _HeldSyncLog(_BatchLog):
    """A _BatchLog whose first forced append of nothing (a sync, HATP-STORE-8) waits for `release` (for ever, when
    the test never sets it)."""

    def __init__(self) -> None:
        super().__init__()
        self.syncing = anyio.Event()
        self.release = anyio.Event()

    async def append(self, txn_id: str, entries: Any, forced: bool = True) -> None:
        if forced and not entries and not self.syncing.is_set():
            self.syncing.set()
            await self.release.wait()
        await super().append(txn_id, entries, forced)


@pytest.mark.anyio
async def test_HATP_TXN_27_the_begin_goes_ahead_of_its_prepares_and_is_durable_before_the_ask(
    clock: FakeClock,
) -> None:
    log = _HeldSyncLog()
    world = build_world(clock, log=log)
    coord = world.coordinator()
    seen: list[tuple[list[str], list[tuple[str, str, str]]]] = []

    async def while_syncing() -> None:  # what the world saw while the begin's sync was under way
        await log.syncing.wait()
        await anyio.wait_all_tasks_blocked()
        seen.append((world.seat.effects + world.room.effects, list(world.approver.calls)))
        log.release.set()

    async def run() -> TxnResult:
        async with anyio.create_task_group() as tg:
            tg.start_soon(while_syncing)
            return await coord.run(trip_plan(clock.now()))

    with anyio.fail_after(10):  # no clock step is needed: the human answers at once
        result = await run()
    assert result.outcome is Outcome.COMMITTED
    # the begin written to the operating system only, then made durable by a forced write of nothing
    assert "plan:None" in log.batches[0] and "txn.begin:None" in log.batches[0] and log.forced[0] is False
    assert log.batches[1] == [] and log.forced[1] is True
    [(holds, asked)] = seen
    assert sorted(holds) == [f"hold {TXN}", f"hold {TXN}"]  # the prepares did not wait for the fsync
    assert [c for c in asked if c[0] == "ask"] == []  # HATP-TXN-17: no human asked about a begin not durable
    assert ("ask", TXN, "finance") in world.approver.calls
    # after the begin, forced are the commit decision (before any commit) and the close the agent is handed
    forced = [b for b, f in zip(log.batches[2:], log.forced[2:], strict=True) if f]
    assert any("decision:None" in b for b in forced) and "record.closed:None" in forced[-1]
    decided = next(i for i, b in enumerate(log.batches) if "decision:None" in b)
    after = [b for b, f in zip(log.batches[decided + 1 :], log.forced[decided + 1 :], strict=True) if f]
    assert after == [log.batches[-1]]  # between the decision and the close nothing is forced


@pytest.mark.anyio
async def test_HATP_TXN_27_a_begin_lost_before_its_fsync_and_sent_again_aborts_with_a_record_that_verifies(
    clock: FakeClock,
) -> None:
    lost = _HeldSyncLog()  # the begin is written, then the power goes before its fsync: never released
    world = build_world(clock, log=lost)
    plan = trip_plan(clock.now())
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(world.coordinator().run, plan)
            await lost.syncing.wait()
            await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()  # the power goes: the process, and the log that never had the begin
    assert world.seat.effects == world.room.effects == [f"hold {TXN}"]  # the prepares went ahead of the fsync
    clock.advance(5)
    world.log = MemoryTxnLog()
    result = await drive(clock, lambda: world.coordinator().run(plan))  # the agent, never answered, begins again
    # the participants answer the same txnId with what they signed at the lost begin's head (HATP-PART-6): no
    # answer to this record (HATP-REC-20), so it aborts and releases the holds, and its record verifies
    assert result.outcome is Outcome.ABORTED and verify_record(result.record, world.keyring) == []
    assert world.seat.effects == [f"hold {TXN}", f"release {TXN}"] and world.pay.effects == []
    failed = bodies(result.record, "call.failed")
    assert failed and all("HATP-REC-20" in b["reason"] for b in failed)


@pytest.mark.anyio
async def test_HATP_TXN_28_the_write_that_tells_the_outcome_is_written_before_the_holds_but_not_forced(
    clock: FakeClock,
) -> None:
    log = _BatchLog()
    world = build_world(clock, log=log)
    coord = world.coordinator()
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    told = next(i for i, b in enumerate(log.batches) if "outcome.decided:None" in b)
    assert log.forced[told] is False and "commit:pay" in log.batches[told]
    order = [(type(c).__name__, getattr(c, "branch_id", getattr(c, "event", None))) for _t, c in coord.trace]
    assert order.index(("Record", "outcome.decided")) < order.index(("SendCommit", "seat"))

"""TxnService: begin returns once durable and runs in the background; status from the log; abort; recovery."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.txn_api import TxnStatus
from hatp_mcp.core.txn.outcome import justify
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.scripted_approver import HumanScript
from hatp_mcp.runtime.coordinator.service import TxnService
from hatp_mcp.store.txn_log import LogEntry, LoggedTxn, MemoryTxnLog, TxnLog

pytestmark = pytest.mark.anyio


def service(world: World, log: TxnLog | None = None) -> TxnService:
    return TxnService(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=world.participants,
        approver=world.approver,
        log=log or world.log,
        clock=world.clock,
    )


def slow_human(clock: FakeClock) -> World:
    return build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=3600)})


async def test_HATP_MCP_20_begin_answers_once_the_plan_is_durable_without_waiting_for_the_human(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            begun = await svc.begin(trip_plan(clock.now(), "txn-bg"))
            logged = await world.log.load("txn-bg")
            await anyio.wait_all_tasks_blocked()
            later = await svc.status("txn-bg")
    assert begun.state in ("preparing", "approving") and begun.decision is None
    assert logged is not None and logged.events[0]["event"] == "txn.begin"
    assert later.state == "approving" and {v.branch_id: v.decision for v in later.votes}["finance"] == "pending"


async def test_HATP_MCP_20_an_invalid_plan_is_refused_with_every_violation_and_nothing_is_written(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    svc = service(world)
    data = trip_plan(clock.now(), "txn-bad").wire()
    data["branches"][0]["amount"] = {"value": "-5.00", "currency": "USD"}
    from hatp_mcp.core.model.plan import Plan

    with anyio.fail_after(10):
        async with svc.running():
            with pytest.raises(HatpError) as info:
                await svc.begin(Plan.model_validate(data))
            pending = await svc.pending()
    assert (info.value.rule, info.value.code) == ("HATP-TXN-1", "PLAN_INVALID")
    assert info.value.data["violations"]
    assert await world.log.load("txn-bad") is None and pending.txns == []
    assert world.effects() == {"seat": [], "room": [], "event": [], "pay": []}


async def test_HATP_VAL_13_begin_refuses_a_plan_whose_approval_is_addressed_to_an_agent_and_writes_nothing(
    clock: FakeClock,
) -> None:
    from hatp_mcp.core.model.plan import Plan

    world = build_world(clock)
    data = trip_plan(clock.now(), "txn-agent-approves").wire()
    data["approvals"][0]["address"] = "agent://acme.com/travel-bot"
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            with pytest.raises(HatpError) as refused:
                await svc.begin(Plan.model_validate(data))
    assert (refused.value.rule, refused.value.code) == ("HATP-TXN-1", "PLAN_INVALID")
    assert refused.value.data is not None
    assert {(v["rule"], v["path"]) for v in refused.value.data["violations"]} == {
        ("HATP-VAL-13", "approvals[0].address")
    }
    assert await world.log.load("txn-agent-approves") is None and world.approver.calls == []


async def test_HATP_MCP_21_the_same_plan_again_starts_nothing_twice_and_another_plan_is_refused(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    svc = service(world)
    plan = trip_plan(clock.now(), "txn-twice")
    other = trip_plan(clock.now(), "txn-twice", summary="another trip")
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(plan)
            await anyio.wait_all_tasks_blocked()
            again = await svc.begin(plan)
            with pytest.raises(HatpError) as info:
                await svc.begin(other)
            await anyio.wait_all_tasks_blocked()
    assert again.txn_id == "txn-twice" and again.plan_digest == plan.digest()
    assert (info.value.rule, info.value.code) == ("HATP-MCP-21", "PLAN_MISMATCH")
    assert world.seat.effects == ["hold txn-twice"]


class OverMemory:
    """A memory log that reads as it is; subclasses change how it appends."""

    def __init__(self) -> None:
        self.inner = MemoryTxnLog()

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return await self.inner.load(txn_id)

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()


class GatedLog(OverMemory):
    """A memory log whose appends wait until `gate` is set: a begin stays in flight, not yet durable, as long as
    the test wants, so a second begin can arrive meanwhile (no sleeps)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = anyio.Event()

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        await self.gate.wait()
        await self.inner.append(txn_id, entries, forced)


async def concurrent_begins(clock: FakeClock, first: Plan, second: Plan) -> tuple[World, GatedLog, list[Any]]:
    """Begin `first`; while it is not yet durable, begin `second` under the same txnId; then let the log write.
    The answers (a TxnStatus or the HatpError raised), in the order [first, second]."""
    world = slow_human(clock)
    log = GatedLog()
    svc = service(world, log)
    answers: list[Any] = [None, None]

    async def begin(i: int, plan: Plan) -> None:
        try:
            answers[i] = await svc.begin(plan)
        except HatpError as exc:
            answers[i] = exc

    with anyio.fail_after(10):
        async with svc.running():
            async with anyio.create_task_group() as tg:
                tg.start_soon(begin, 0, first)
                await anyio.wait_all_tasks_blocked()  # the first begin waits for its plan to be durable
                tg.start_soon(begin, 1, second)
                await anyio.wait_all_tasks_blocked()
                log.gate.set()
            await anyio.wait_all_tasks_blocked()
    return world, log, answers


async def test_HATP_MCP_21_a_second_begin_of_another_plan_while_the_first_is_in_flight_is_refused(
    clock: FakeClock,
) -> None:
    plan = trip_plan(clock.now(), "txn-race")
    other = trip_plan(clock.now(), "txn-race", summary="another trip")
    world, log, (first, second) = await concurrent_begins(clock, plan, other)
    logged = await log.load("txn-race")
    assert isinstance(first, TxnStatus) and first.plan_digest == plan.digest()
    assert isinstance(second, HatpError), second
    assert (second.rule, second.code) == ("HATP-MCP-21", "PLAN_MISMATCH")
    assert logged is not None and Plan.model_validate(logged.plan).digest() == plan.digest()
    assert world.seat.effects == ["hold txn-race"]


async def test_HATP_MCP_21_a_second_begin_of_the_same_plan_while_the_first_is_in_flight_answers_its_status(
    clock: FakeClock,
) -> None:
    plan = trip_plan(clock.now(), "txn-race-same")
    world, log, (first, second) = await concurrent_begins(clock, plan, plan)
    logged = await log.load("txn-race-same")
    assert isinstance(first, TxnStatus) and isinstance(second, TxnStatus), second
    assert first.plan_digest == second.plan_digest == plan.digest()
    assert logged is not None and [e["event"] for e in logged.events].count("txn.begin") == 1  # one run, not two
    assert world.seat.effects == ["hold txn-race-same"]  # one transaction, begun once


class DroppingLog(OverMemory):
    """A memory log whose next append fails as a store does when its server restarts: before the write
    (`lands=False`: nothing written) or after it (`lands=True`: the commit reached the log, its answer was lost)."""

    def __init__(self, lands: bool) -> None:
        super().__init__()
        self.lands = lands
        self.failures = 1

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        if self.failures and self.lands:
            await self.inner.append(txn_id, entries, forced)
        if self.failures:
            self.failures -= 1
            raise OSError("server closed the connection unexpectedly")
        await self.inner.append(txn_id, entries, forced)


async def test_HATP_MCP_67_a_begin_whose_write_failed_says_so_and_the_same_begin_again_begins_it(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    log = DroppingLog(lands=False)
    svc = service(world, log)
    plan = trip_plan(clock.now(), "txn-dropped")
    with anyio.fail_after(10):
        async with svc.running():
            with pytest.raises(HatpError) as info:
                await svc.begin(plan)
            before = await log.load("txn-dropped")
            again = await svc.begin(plan)
            await anyio.wait_all_tasks_blocked()
    assert (info.value.rule, info.value.code, info.value.path) == ("HATP-MCP-67", "STORE_UNAVAILABLE", "$.txnId")
    assert "nothing was begun" in info.value.reason and "same begin again" in (info.value.fix or "")
    assert "closed the connection" not in str(info.value)  # the store's own words stay in the coordinator's log
    assert before is None and again.plan_digest == plan.digest() and again.state in ("preparing", "approving")
    assert world.seat.effects == ["hold txn-dropped"]  # begun once, by the second begin


async def test_HATP_MCP_67_a_begin_whose_write_landed_but_whose_answer_was_lost_answers_the_logged_transaction(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    log = DroppingLog(lands=True)
    svc = service(world, log)
    plan = trip_plan(clock.now(), "txn-landed")
    with anyio.fail_after(10):
        async with svc.running():
            begun = await svc.begin(plan)
            again = await svc.begin(plan)
    assert begun.txn_id == again.txn_id == "txn-landed" and begun.plan_digest == plan.digest()
    assert world.seat.effects == []  # the run stopped at its first write: recovery finishes it (HATP-MCP-24)


class SyncLog(OverMemory):
    """A memory log whose forced appends of nothing (the begin's sync, HATP-TXN-27) wait for `synced` (`fail`: then
    raise, as a failed fsync does); everything else appends at once."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.synced = anyio.Event()
        self.syncing = anyio.Event()
        self.fail = fail

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        if forced and not entries:
            self.syncing.set()
            await self.synced.wait()
            if self.fail:
                raise OSError("fsync failed")
        await self.inner.append(txn_id, entries, forced)


async def test_HATP_TXN_27_begin_is_answered_once_the_begin_is_durable_not_when_it_is_written(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    log = SyncLog()
    svc = service(world, log)
    answered: list[TxnStatus] = []
    with anyio.fail_after(10):
        async with svc.running(), anyio.create_task_group() as tg:

            async def begin() -> None:
                answered.append(await svc.begin(trip_plan(clock.now(), "txn-sync")))

            tg.start_soon(begin)
            await log.syncing.wait()
            await anyio.wait_all_tasks_blocked()
            written = await log.load("txn-sync")
            early = list(answered)
            log.synced.set()
    assert written is not None and written.events[0]["event"] == "txn.begin"  # written, its prepares out
    assert world.seat.effects == ["hold txn-sync"]
    assert early == []  # HATP-MCP-20: not answered before the fsync
    assert [a.txn_id for a in answered] == ["txn-sync"]


async def test_HATP_TXN_27_a_begin_whose_sync_failed_stops_and_a_replacement_releases_its_holds(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    log = SyncLog(fail=True)
    log.synced.set()
    svc = service(world, log)
    with anyio.fail_after(10):
        async with svc.running():
            begun = await svc.begin(trip_plan(clock.now(), "txn-unsynced"))  # HATP-MCP-67: the log holds it
            await anyio.wait_all_tasks_blocked()
            stopped = list(world.approver.calls)
        log.fail = False
        replacement = service(world, log)
        async with replacement.running():
            recovered = await replacement.recover_unfinished()
            await anyio.wait_all_tasks_blocked()
            status = await replacement.status("txn-unsynced", wait_seconds=60)
    assert begun.txn_id == "txn-unsynced" and world.seat.effects[0] == "hold txn-unsynced"
    assert [c for c in stopped if c[0] == "ask"] == []  # stopped at the sync: no human was asked
    assert recovered == ["txn-unsynced"] and status.outcome == "ABORTED"
    assert world.seat.effects == ["hold txn-unsynced", "release txn-unsynced"]  # presumed abort releases it


async def test_HATP_MCP_22_status_of_an_unknown_transaction_is_refused(clock: FakeClock) -> None:
    svc = service(build_world(clock))
    async with svc.running():
        with pytest.raises(HatpError) as info:
            await svc.status("txn-nobody")
    assert (info.value.rule, info.value.code, info.value.path) == ("HATP-MCP-22", "UNKNOWN_TXN", "$.txnId")


async def test_HATP_MCP_22_a_finished_transaction_reports_its_outcome_and_a_record_that_verifies(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-done"))
            done = await svc.wait("txn-done")
            again = await service(world).status("txn-done")  # another service on the same log: the same answer
    assert (done.state, done.outcome, done.decision) == ("committed", "COMMITTED", "commit")
    assert done.record is not None and verify_record(done.record, world.keyring) == []
    assert again == done


async def test_HATP_MCP_23_abort_before_the_decision_releases_every_hold_and_withdraws_the_ask(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-stop"))
            await anyio.wait_all_tasks_blocked()
            aborting = await svc.abort("txn-stop", "the trip is off")
            done = await svc.wait("txn-stop")
            again = await svc.abort("txn-stop")
    assert aborting.decision == "abort"
    assert (done.outcome, again.outcome) == ("ABORTED", "ABORTED")
    assert world.seat.effects == ["hold txn-stop", "release txn-stop"]
    assert world.room.effects == ["hold txn-stop", "release txn-stop"]
    assert world.pay.effects == [] and ("withdraw", "txn-stop", "finance") in world.approver.calls
    assert done.record is not None and verify_record(done.record, world.keyring) == []


async def test_HATP_TXN_4_records_that_waited_are_kept_when_the_agent_aborts_while_a_prepare_is_in_flight(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)

    async def hangs(*args: Any, **kwargs: Any) -> Any:
        await anyio.sleep_forever()

    world.room.dry_run = hangs  # type: ignore[method-assign]
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-hang"))
            await anyio.wait_all_tasks_blocked()  # three votes are in, waiting for a forced write; room never answers
            await svc.abort("txn-hang", "the trip is off")
            done = await svc.wait("txn-hang")
    assert done.outcome == "ABORTED" and done.record is not None
    votes = [e["body"]["branchId"] for e in done.record["events"] if e["event"] == "vote"]
    assert sorted(votes) == ["event", "finance", "pay", "seat"]
    assert verify_record(done.record, world.keyring) == []


async def test_HATP_MCP_23_abort_once_commit_is_decided_is_refused_and_the_trip_stays_committed(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-late"))
            await svc.wait("txn-late")
            with pytest.raises(HatpError) as info:
                await svc.abort("txn-late", "too late")
            status = await svc.status("txn-late")
    assert (info.value.rule, info.value.code) == ("HATP-MCP-23", "ILLEGAL_TRANSITION")
    assert status.outcome == "COMMITTED" and world.pay.effects == ["capture txn-late"]


async def stop_undecided_then_recover(
    world: World, clock: FakeClock, txn_id: str, stopped_seconds: float = 901
) -> tuple[list[str], TxnStatus, list[Any]]:
    """Begin `txn_id` on one service, stop it while the human still decides (no decision in the log), leave it
    stopped `stopped_seconds` (by default past the holds' 900 s leases, so the replacement cannot wait again,
    HATP-TXN-23), then let a new service on the same log recover it, moving the clock a minute at a time until it
    ends: (what it recovered, the finished transaction, approver calls at the stop)."""
    log = MemoryTxnLog()
    with anyio.fail_after(10):
        async with service(world, log).running() as first:
            await first.begin(trip_plan(clock.now(), txn_id))
            await anyio.wait_all_tasks_blocked()
        calls_at_stop = list(world.approver.calls)
        clock.advance(stopped_seconds)
        async with service(world, log).running() as second:
            recovered = await second.recover_unfinished()
            for _ in range(240):  # bounded: four hours of the fake clock
                await anyio.wait_all_tasks_blocked()
                if (await second.status(txn_id)).outcome is not None:
                    break
                clock.advance(60)
            done = await second.wait(txn_id)
    return recovered, done, calls_at_stop


async def test_HATP_TXN_22_a_new_service_waits_again_for_the_human_a_stopped_one_left_asked_and_commits(
    clock: FakeClock,
) -> None:
    """The human decides 20 minutes after the ask, ten of them while no coordinator runs: the replacement polls
    the ask the approver kept, renews the 900 s leases meanwhile, and commits once the human said yes."""
    world = build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=1200)})
    recovered, done, calls_at_stop = await stop_undecided_then_recover(world, clock, "txn-resumed", 600)
    assert recovered == ["txn-resumed"]
    assert done.outcome == "COMMITTED", done.decision_reason
    assert done.record is not None and verify_record(done.record, world.keyring) == []
    names = [e["event"] for e in events_of(done.record)]
    recovered_body = events_of(done.record)[names.index("coordinator.recovered")]["body"]
    assert recovered_body == {"decision": "resumed", "phase": "approving"}
    assert "renew" in names[names.index("coordinator.recovered") :]  # the leases were kept while it waited
    later = world.approver.calls[len(calls_at_stop) :]
    assert ("poll", "txn-resumed", "finance") in later and ("withdraw", "txn-resumed", "finance") not in later
    assert world.seat.effects == ["hold txn-resumed", "book txn-resumed"]


async def test_HATP_TXN_24_a_commit_after_a_resume_the_record_does_not_ground_is_not_justified(
    clock: FakeClock,
) -> None:
    world = build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=1200)})
    _recovered, done, _calls = await stop_undecided_then_recover(world, clock, "txn-grounds", 600)
    assert done.record is not None and done.outcome == "COMMITTED"
    plan = Plan.model_validate(done.record["plan"])
    events = events_of(done.record)
    resumed = next(i for i, e in enumerate(events) if e["event"] == "coordinator.recovered")
    assert justify(plan, plan.digest(), events, "COMMITTED", world.keyring, None).problems == ()
    # the same record without the gateway's pending vote: nothing showed an ask open when it resumed
    ungrounded = [
        e
        for i, e in enumerate(events)
        if not (i < resumed and e["event"] == "vote" and e["body"].get("branchId") == "finance")
    ]
    problems = justify(plan, plan.digest(), ungrounded, "COMMITTED", world.keyring, None).problems
    assert [p.rule for p in problems] == ["HATP-TXN-24"], problems
    assert "approval finance has no open ask" in problems[0].reason


async def test_HATP_TXN_23_a_lease_that_ended_while_no_coordinator_ran_aborts_with_that_reason(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    _recovered, done, _calls = await stop_undecided_then_recover(world, clock, "txn-lapsed", 901)
    assert done.outcome == "ABORTED" and done.record is not None
    assert (done.decision_reason or "").startswith("LEASE_EXPIRED"), done.decision_reason
    recovered = next(e for e in events_of(done.record) if e["event"] == "coordinator.recovered")
    assert recovered["body"]["decision"] == "presumed-abort" and "lease ended" in recovered["body"]["notResumed"]
    assert verify_record(done.record, world.keyring) == []


async def test_HATP_MCP_24_a_new_service_on_the_same_log_finishes_what_a_stopped_one_left_undecided(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    recovered, done, _asked = await stop_undecided_then_recover(world, clock, "txn-left")
    assert recovered == ["txn-left"]
    assert done.outcome == "ABORTED"
    assert world.seat.effects == ["hold txn-left", "release txn-left"]
    assert done.record is not None and verify_record(done.record, world.keyring) == []
    assert [e["event"] for e in done.record["events"]].count("coordinator.recovered") == 1


async def test_HATP_MCP_22_status_with_after_events_answers_on_progress_not_only_at_the_end(clock: FakeClock) -> None:
    world = slow_human(clock)
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            begun = await svc.begin(trip_plan(clock.now(), "txn-follow"))
            moved = await svc.status("txn-follow", wait_seconds=5, after_events=begun.event_count)
            await anyio.wait_all_tasks_blocked()
            settled = await svc.status("txn-follow")
    assert begun.event_count < moved.event_count <= settled.event_count
    assert moved.outcome is None


def events_of(record: dict[str, object]) -> list[dict[str, Any]]:
    return list(record["events"])  # type: ignore[call-overload]


async def test_HATP_TXN_18_the_agents_abort_request_is_an_event_of_the_record_with_its_reason_and_who_asked(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    svc = service(world)
    plan = trip_plan(clock.now(), "txn-asked")
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(plan)
            await anyio.wait_all_tasks_blocked()
            await svc.abort("txn-asked", "the trip is off")
            done = await svc.wait("txn-asked")
    assert done.record is not None and verify_record(done.record, world.keyring) == []
    events = events_of(done.record)
    names = [e["event"] for e in events]
    asked = events[names.index("abort.requested")]
    assert asked["body"] == {"reason": "the trip is off", "by": plan.requester.agent}
    decision = events[names.index("decision")]
    assert names.index("abort.requested") < names.index("decision")
    assert decision["body"]["reason"] == "ABORT_REQUESTED: the agent asked: the trip is off"


async def test_HATP_TXN_17_recovery_at_startup_withdraws_the_pending_ask_through_the_approver_and_records_it(
    clock: FakeClock,
) -> None:
    world = slow_human(clock)
    _recovered, done, calls_at_stop = await stop_undecided_then_recover(world, clock, "txn-asked-left")
    assert ("withdraw", "txn-asked-left", "finance") not in calls_at_stop  # the human was still asked
    assert done.outcome == "ABORTED" and done.record is not None
    assert verify_record(done.record, world.keyring) == []
    withdrawn = [e["body"] for e in events_of(done.record) if e["event"] == "approval.withdrawn"]
    assert withdrawn == [{"requirementId": "finance", "reason": "LEASE_EXPIRED"}]
    assert world.approver.calls.count(("withdraw", "txn-asked-left", "finance")) >= 1
    assert "abort.requested" not in [e["event"] for e in events_of(done.record)]  # nobody asked: presumed


async def test_HATP_TXN_21_with_the_agent_cards_an_unproven_requester_is_refused_and_nothing_is_written(
    clock: FakeClock,
) -> None:
    from tests.acme_org import agent_key, agent_keys, agent_request, h

    world = build_world(clock)
    strict = TxnService(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=world.participants,
        approver=world.approver,
        log=world.log,
        clock=world.clock,
        agents=agent_keys(),
    )
    held = TxnService(  # holds the travel-bot's key: signs for a client that cannot sign, as the card says
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=world.participants,
        approver=world.approver,
        log=world.log,
        clock=world.clock,
        agents=agent_keys(),
        agent_key=agent_key(),
    )
    as_bob = trip_plan(
        clock.now(), "txn-as-bob", requester={"principal": h("bob"), "agent": "agent://acme.com/travel-bot"}
    )
    with anyio.fail_after(10):
        async with strict.running(), held.running():
            with pytest.raises(HatpError) as unsigned:
                await strict.begin(trip_plan(clock.now(), "txn-unsigned"))
            with pytest.raises(HatpError) as renamed:
                await held.begin(as_bob)  # the client wrote bob; the key's card acts for dana
            plan = trip_plan(clock.now(), "txn-signed")
            signed = await strict.begin(plan, agent_request(plan.digest(), clock.now(), subject="plan"))
            by_holder = await held.begin(trip_plan(clock.now(), "txn-held"))
    assert (unsigned.value.rule, renamed.value.rule) == ("HATP-TXN-21", "HATP-TXN-21")
    assert await world.log.load("txn-unsigned") is None and await world.log.load("txn-as-bob") is None
    assert signed.txn_id == "txn-signed" and by_holder.txn_id == "txn-held"


def holds_wait(world: World) -> anyio.Event:
    """The holds' commits (seat, room) wait until the returned event is set; the other calls go through."""
    release = anyio.Event()
    for participant in world.participants.values():

        async def commit(req: Any, inner: Any = participant.commit) -> Any:
            if req.branch_id in ("seat", "room"):
                await release.wait()
            return await inner(req)

        participant.commit = commit  # type: ignore[method-assign]
    return release


async def test_HATP_MCP_65_the_outcome_is_answered_once_decided_while_the_holds_are_still_being_confirmed(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    release = holds_wait(world)
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-told"))
            told = await svc.status("txn-told", wait_seconds=60)
            effects_when_told = {k: list(v) for k, v in world.effects().items()}
            again = await service(world).status("txn-told")  # from the log: a restarted service says the same
            release.set()
            done = await svc.wait("txn-told")
    assert (told.outcome, told.closed, told.decision, told.state) == ("COMMITTED", False, "commit", "committing")
    assert told.confirming == ["seat", "room"] and told.record is None and told.results == []
    assert effects_when_told["pay"] == ["capture txn-told"] and "book txn-told" not in effects_when_told["seat"]
    assert again == told
    assert (done.outcome, done.closed, done.confirming) == ("COMMITTED", True, [])
    assert done.record is not None and verify_record(done.record, world.keyring) == []


async def test_HATP_MCP_66_a_wait_once_the_outcome_was_answered_waits_for_the_record_to_close(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    release = holds_wait(world)
    svc = service(world)
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-close"))
            told = await svc.status("txn-close", wait_seconds=60)
            async with anyio.create_task_group() as tg:
                closed: list[TxnStatus] = []

                async def wait_for_close() -> None:
                    closed.append(await svc.status("txn-close", wait_seconds=60))

                tg.start_soon(wait_for_close)
                await anyio.wait_all_tasks_blocked()
                assert closed == []  # told already: this wait is for the close, not answered at once
                release.set()
    assert told.outcome == "COMMITTED" and not told.closed
    assert closed[0].closed and closed[0].outcome == "COMMITTED" and closed[0].record is not None

"""The participant wrapper: signed votes and receipts, idempotency, preconditions, tiers, locks."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import pytest

from demo.trip_world import AIRLINE, CALENDAR, PAYMENTS, World, build_world, trip_plan
from hatp_mcp.core.model.evidence import Preconditions, RecordHead
from hatp_mcp.core.model.messages import (
    AbortRequest,
    CommitRequest,
    CompensateRequest,
    PrepareRequest,
    RenewRequest,
    StatusRequest,
)
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.participant.driver import Operation, ParticipantRuntime, Performed
from hatp_mcp.store.participant_state import MemoryParticipantStore
from tests.coordinators import KEY, decision_event
from tests.locks import acquire, release
from tests.txn_helpers import settle


def prep(plan: Plan, branch: str, **kw: object) -> PrepareRequest:
    return PrepareRequest(
        txn_id=plan.txn_id, branch_id=branch, plan_digest=plan.digest(), plan=plan, coordinator="c://x", **kw
    )


def commit_req(plan: Plan, branch: str, pre: dict[str, object]) -> CommitRequest:
    return CommitRequest(
        txn_id=plan.txn_id, branch_id=branch, plan_digest=plan.digest(), preconditions=Preconditions.model_validate(pre)
    )


@pytest.fixture
def world(clock: FakeClock) -> World:
    return build_world(clock, max_lease_seconds=300)


@pytest.mark.anyio
async def test_a_prepare_answers_a_signed_vote_and_receipt_with_preconditions_cost_and_lease(
    world: World, clock: FakeClock
) -> None:
    plan = trip_plan(clock.now())
    res = await world.participants[AIRLINE].prepare(prep(plan, "seat"))
    assert verify_raw(res.vote, world.keyring, "participant") == "airline-1"
    verify_raw(res.receipt, world.keyring, "participant")
    r = res.receipt
    assert res.vote["decision"] == "yes" and r["planDigest"] == plan.digest()  # HATP-PART-1
    assert r["preconditions"] == {"versions": {"seat:inventory": "1"}, "credentialScope": "book"}
    assert r["reportedCost"] == {"value": "600.00", "currency": "USD"}
    assert r["leaseExpiresAt"] == "2026-11-29T10:05:00Z" and r["holdHorizon"] == "2026-11-29T14:00:00Z"


@pytest.mark.anyio
async def test_a_prepare_naming_another_plan_digest_votes_no_HATP_PART_2(world: World, clock: FakeClock) -> None:
    plan = trip_plan(clock.now())
    other = trip_plan(clock.now(), summary="something else")
    req = prep(plan, "seat").model_copy(update={"plan_digest": other.digest()})
    res = await world.participants[AIRLINE].prepare(req)
    assert (res.vote["decision"], res.vote["code"]) == ("no", "PLAN_MISMATCH")  # HATP-PART-2
    assert world.seat.effects == []


@pytest.mark.anyio
async def test_a_plan_that_understates_the_cost_gets_a_no_vote(world: World, clock: FakeClock) -> None:
    world.seat.price = world.seat.price.of("650.00", "USD")
    res = await world.participants[AIRLINE].prepare(prep(trip_plan(clock.now()), "seat"))
    assert (res.vote["decision"], res.vote["code"]) == ("no", "COST_UNDERSTATED")  # HATP-PART-3
    assert res.receipt["outcome"] == "refused"


@pytest.mark.anyio
async def test_a_renewal_after_the_lease_lapsed_is_refused_and_a_new_prepare_places_the_hold_again(
    world: World, clock: FakeClock
) -> None:
    plan = trip_plan(clock.now())
    airline = world.participants[AIRLINE]
    await airline.prepare(prep(plan, "seat"))
    clock.advance(301)
    renew = RenewRequest(txn_id=plan.txn_id, branch_id="seat", plan_digest=plan.digest(), lease_seconds=300)
    r = (await airline.renew(renew)).receipt
    assert (r["outcome"], r["code"]) == ("refused", "HOLD_LOST")  # HATP-PART-4
    again = await airline.prepare(prep(plan, "seat"))
    assert again.vote["decision"] == "yes" and world.seat.effects == ["hold txn-trip-0001", "hold txn-trip-0001"]


@pytest.mark.anyio
async def test_a_commit_whose_preconditions_changed_is_refused_and_does_nothing(world: World, clock: FakeClock) -> None:
    plan = trip_plan(clock.now())
    payments = world.participants[PAYMENTS]
    res = await payments.prepare(prep(plan, "pay"))
    world.pay.version = 2
    r = (await payments.commit(commit_req(plan, "pay", res.receipt["preconditions"]))).receipt
    assert (r["outcome"], r["code"]) == ("refused", "PRECONDITION_CHANGED")  # HATP-PART-5
    assert world.pay.effects == []


@pytest.mark.anyio
async def test_every_request_is_idempotent_and_a_repeated_commit_returns_the_first_answer(
    world: World, clock: FakeClock
) -> None:
    plan = trip_plan(clock.now())
    cal = world.participants[CALENDAR]
    first = await cal.prepare(prep(plan, "event"))
    assert (await cal.prepare(prep(plan, "event"))) == first
    c1 = await cal.commit(commit_req(plan, "event", first.receipt["preconditions"]))
    clock.advance(5)
    c2 = await cal.commit(commit_req(plan, "event", first.receipt["preconditions"]))
    assert c1 == c2 and world.event.effects == ["create txn-trip-0001"]  # HATP-PART-6
    status = await cal.status(StatusRequest(txn_id=plan.txn_id, branch_id="event"))
    assert status.state == "committed" and status.receipt == c1.receipt
    unprepared = await cal.commit(commit_req(plan.model_copy(update={"txn_id": "txn-other"}), "event", {}))
    assert (unprepared.receipt["outcome"], unprepared.receipt["code"]) == ("refused", "NOT_PREPARED")
    aborted = trip_plan(clock.now(), "txn-aborted")
    await cal.abort(AbortRequest(txn_id=aborted.txn_id, branch_id="event", plan_digest=aborted.digest()))
    late = await cal.prepare(prep(aborted, "event"))
    assert (late.vote["decision"], late.vote["code"]) == ("no", "ALREADY_ABORTED")


@pytest.mark.anyio
async def test_requests_on_one_branch_run_one_at_a_time_and_the_lock_is_forgotten_after(
    world: World, clock: FakeClock
) -> None:
    plan = trip_plan(clock.now())
    cal = world.participants[CALENDAR]
    assert isinstance(cal, ParticipantRuntime)
    first = await cal.prepare(prep(plan, "event"))
    req = commit_req(plan, "event", first.receipt["preconditions"])
    answers = await asyncio.gather(cal.commit(req), cal.commit(req), cal.commit(req))  # at once, same branch
    assert answers[0] == answers[1] == answers[2] and world.event.effects == ["create txn-trip-0001"]
    assert cal._locks == {}  # nobody holds or awaits it: forgotten

    async def blocked() -> None:
        async with cal._lock(plan.txn_id, "event"):
            await asyncio.Event().wait()  # held while a second request waits, until cancelled below

    holder = asyncio.ensure_future(blocked())
    await settle()
    waiter = asyncio.ensure_future(cal.commit(req))
    await settle()
    assert cal._locks[(plan.txn_id, "event")][1] == 2  # one holds, one waits
    waiter.cancel()
    holder.cancel()
    await asyncio.gather(holder, waiter, return_exceptions=True)
    assert cal._locks == {}  # a waiter cancelled while waiting leaves nothing behind


@pytest.mark.anyio
async def test_only_a_committed_compensate_branch_inside_its_window_can_be_compensated_HATP_PART_7(
    world: World, clock: FakeClock
) -> None:
    plan = trip_plan(clock.now())
    cal, pay = world.participants[CALENDAR], world.participants[PAYMENTS]
    for p, b in ((cal, "event"), (pay, "pay")):
        res = await p.prepare(prep(plan, b))
        await p.commit(commit_req(plan, b, res.receipt["preconditions"]))
    final = await pay.compensate(CompensateRequest(txn_id=plan.txn_id, branch_id="pay", plan_digest=plan.digest()))
    assert (final.receipt["outcome"], final.receipt["code"]) == ("refused", "IRREVERSIBLE")  # HATP-PART-7
    clock.advance(86401)
    late = await cal.compensate(
        CompensateRequest(txn_id=plan.txn_id, branch_id="event", plan_digest=plan.digest(), undo_token="evt-1")
    )
    assert late.receipt["code"] == "UNDO_WINDOW_PASSED" and world.event.effects == ["create txn-trip-0001"]


@pytest.mark.anyio
async def test_locks_hand_out_growing_fencing_tokens_and_refuse_stale_writes_HATP_LOCK_3(
    world: World, clock: FakeClock
) -> None:
    airline = world.participants[AIRLINE]
    a = airline.lock_acquire(acquire("seat-14C", "txn-a"))
    with pytest.raises(HatpError) as err:
        airline.lock_acquire(acquire("seat-14C", "txn-b"))
    assert err.value.code == "LOCKED"  # HATP-LOCK-1
    clock.advance(31)
    b = airline.lock_acquire(acquire("seat-14C", "txn-b"))
    assert b.token > a.token  # HATP-LOCK-3
    with pytest.raises(HatpError) as err:
        airline.fenced_write("seat-14C", a.token)
    assert err.value.rule == "HATP-LOCK-2"
    released = airline.lock_release(release("seat-14C", b.token, "txn-b"))
    assert released.released and released.owner == "txn-b"


def test_fencing_tokens_keep_growing_after_the_participant_restarts(clock: FakeClock, tmp_path: Path) -> None:
    from hatp_mcp.runtime.participant.driver import ParticipantRuntime
    from hatp_mcp.store.participant_state import SqliteParticipantStore

    key = SigningKey.generate(["participant"])
    first = ParticipantRuntime(AIRLINE, key, {}, SqliteParticipantStore(tmp_path / "p.db"), clock)
    old = first.lock_acquire(acquire("seat-14C", "txn-a"))
    clock.advance(31)
    again = ParticipantRuntime(AIRLINE, key, {}, SqliteParticipantStore(tmp_path / "p.db"), clock)  # a restart
    new = again.lock_acquire(acquire("seat-14C", "txn-b"))
    assert new.token == old.token + 1  # HATP-LOCK-3: never handed out twice, even after a restart
    with pytest.raises(HatpError) as err:
        again.fenced_write("seat-14C", old.token)
    assert err.value.code == "STALE_TOKEN"


class KeyedCapture(Operation):
    """A payment API honouring idempotency keys: it remembers each key's charge; it can be made to stop the
    "process" (raise) right after its effect, as a crash between the effect and the state save would."""

    def __init__(self, store: MemoryParticipantStore) -> None:
        self.store = store
        self.charges: dict[str, str] = {}
        self.calls: list[tuple[str, str | None]] = []  # (key, branch state seen when the effect ran)
        self.crash_after_effect = False
        self.can_look_up = True

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        row = self.store.get(txn_id, branch.branch_id)
        self.calls.append((key, row.state if row else None))
        token = self.charges.setdefault(key, f"ch_{len(self.charges) + 1}")
        if self.crash_after_effect:
            raise _Crash
        return token

    async def lookup(self, key: str, branch: Branch) -> Performed | None:
        if not self.can_look_up:
            return None
        return Performed(self.charges[key]) if key in self.charges else None


class _Crash(BaseException):
    """Stands in for the process dying: nothing after the effect runs."""


def keyed_payments(clock: FakeClock) -> tuple[ParticipantRuntime, KeyedCapture]:
    store = MemoryParticipantStore()
    op = KeyedCapture(store)
    key = SigningKey.generate(["participant"], kid="payments-1")
    return ParticipantRuntime(PAYMENTS, key, {"card.capture": op}, store, clock), op


@pytest.mark.anyio
async def test_HATP_PART_10_the_commit_intent_is_durable_before_the_effect_which_gets_the_idempotency_key(
    clock: FakeClock,
) -> None:
    pay, op = keyed_payments(clock)
    plan = trip_plan(clock.now())
    res = await pay.prepare(prep(plan, "pay"))
    done = await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    assert op.calls == [(f"{plan.txn_id}:pay", "committing")]  # the row said committing while the effect ran
    assert (done.receipt["outcome"], done.receipt["undoToken"]) == ("ok", "ch_1")


@pytest.mark.anyio
async def test_HATP_PART_11_a_retry_after_a_crash_between_effect_and_save_looks_up_instead_of_charging_again(
    clock: FakeClock,
) -> None:
    pay, op = keyed_payments(clock)
    plan = trip_plan(clock.now())
    res = await pay.prepare(prep(plan, "pay"))
    op.crash_after_effect = True
    with pytest.raises(_Crash):
        await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    assert pay.store.get(plan.txn_id, "pay").state == "committing"  # type: ignore[union-attr]
    status = await pay.status(StatusRequest(txn_id=plan.txn_id, branch_id="pay"))
    assert status.state == "committing"  # the effect may have happened, no result yet: never "prepared"
    aborted = await pay.abort(AbortRequest(txn_id=plan.txn_id, branch_id="pay", plan_digest=plan.digest()))
    assert (aborted.receipt["outcome"], aborted.receipt["code"]) == ("refused", "ILLEGAL_TRANSITION")
    op.crash_after_effect = False
    clock.advance(3600)  # long after: the lease and preconditions are not asked again, the effect may have happened
    again = await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    assert (again.receipt["outcome"], again.receipt["undoToken"]) == ("ok", "ch_1")
    assert len(op.calls) == 1 and op.charges == {f"{plan.txn_id}:pay": "ch_1"}  # charged exactly once
    assert await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"])) == again


@pytest.mark.anyio
async def test_HATP_PART_11_an_operation_that_cannot_tell_is_performed_again_with_the_same_key(
    clock: FakeClock,
) -> None:
    pay, op = keyed_payments(clock)
    plan = trip_plan(clock.now())
    res = await pay.prepare(prep(plan, "pay"))
    op.crash_after_effect, op.can_look_up = True, False
    with pytest.raises(_Crash):
        await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    op.crash_after_effect = False
    again = await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    key = f"{plan.txn_id}:pay"
    assert op.calls == [(key, "committing"), (key, "committing")]  # the same key both times
    assert (again.receipt["outcome"], again.receipt["undoToken"], len(op.charges)) == ("ok", "ch_1", 1)


@pytest.mark.anyio
async def test_HATP_PART_12_a_compensation_retried_after_a_crash_undoes_again_with_the_same_key(
    world: World, clock: FakeClock
) -> None:
    plan = trip_plan(clock.now())
    cal = world.participants[CALENDAR]
    res = await cal.prepare(prep(plan, "event"))
    await cal.commit(commit_req(plan, "event", res.receipt["preconditions"]))
    seen: list[tuple[str, str | None]] = []
    original = world.event.undo

    async def crashing_undo(txn_id: str, branch: Branch, token: str | None, now: datetime, *, key: str) -> None:
        row = cal.store.get(txn_id, branch.branch_id)  # type: ignore[attr-defined]
        seen.append((key, row.state if row else None))
        await original(txn_id, branch, token, now, key=key)
        if len(seen) == 1:
            raise _Crash

    world.event.undo = crashing_undo  # type: ignore[method-assign]
    req = CompensateRequest(txn_id=plan.txn_id, branch_id="event", plan_digest=plan.digest(), undo_token="evt-1")
    with pytest.raises(_Crash):
        await cal.compensate(req)
    status = await cal.status(StatusRequest(txn_id=plan.txn_id, branch_id="event"))
    assert status.state == "compensating"  # the undo may have happened, no result yet: never "committed"
    done = await cal.compensate(req)
    assert done.receipt["outcome"] == "ok"
    assert seen == [(f"{plan.txn_id}:event", "compensating")] * 2


@pytest.mark.anyio
async def test_HATP_REC_19_every_answer_signs_the_head_its_request_named_and_a_commit_the_decisions_own(
    world: World, clock: FakeClock
) -> None:
    plan = trip_plan(clock.now())
    cal = world.participants[CALENDAR]
    head = RecordHead(seq=2, event_digest="sha256:" + "a" * 64)
    prepared = await cal.prepare(prep(plan, "event", record_head=head))
    assert prepared.vote["recordHead"] == prepared.receipt["recordHead"] == {"seq": 2, "digest": "sha256:" + "a" * 64}
    decision = decision_event(plan.txn_id, plan.digest())  # a decision event at seq 1 ...
    at_five = sign_object({**decision, "seq": 5}, KEY)  # ... and one at seq 5, after the vote's head
    pre = Preconditions.model_validate(prepared.receipt["preconditions"])
    fields = {"txn_id": plan.txn_id, "branch_id": "event", "plan_digest": plan.digest(), "preconditions": pre}
    vote = digest(prepared.vote)
    # HATP-REC-23: a decision at seq 1 comes before the head (2) the vote answered at: refused, nothing kept
    with pytest.raises(HatpError) as refused:
        await cal.commit(CommitRequest(**fields, decision=decision, vote_digest=vote))
    assert (refused.value.rule, refused.value.code) == ("HATP-REC-23", "HEAD_REORDERED")
    assert world.event.effects == []
    status = await cal.status(StatusRequest(txn_id=plan.txn_id, branch_id="event"))
    assert status.state == "prepared"
    committed = (await cal.commit(CommitRequest(**fields, decision=at_five, vote_digest=vote))).receipt
    assert committed["outcome"] == "ok" and committed["recordHead"] == {"seq": 5, "digest": digest(at_five)}
    aborted = trip_plan(clock.now(), "txn-aborted")
    abort = AbortRequest(txn_id=aborted.txn_id, branch_id="event", plan_digest=aborted.digest(), record_head=head)
    assert (await cal.abort(abort)).receipt["recordHead"] == head.wire()


def locking(plan: Plan, branch_id: str, *resources: str) -> Plan:
    """`plan` with `branch_id` naming `resources` as the ones it writes (Branch.locks)."""
    data = plan.wire()
    for b in data["branches"]:
        if b["branchId"] == branch_id:
            b["locks"] = list(resources)
    return Plan.model_validate(data)


@pytest.mark.anyio
async def test_HATP_LOCK_6_a_commit_without_the_live_token_of_each_locked_resource_is_refused_and_writes_nothing(
    world: World, clock: FakeClock
) -> None:
    payments = world.participants[PAYMENTS]
    refused = []
    for txn, tokens in (("txn-no-token", None), ("txn-wrong-token", {"card/4242": 99})):
        plan = locking(trip_plan(clock.now(), txn), "pay", "card/4242")
        held = payments.lock_acquire(acquire("card/4242", txn, 600, branch_id="pay"))
        res = await payments.prepare(prep(plan, "pay"))
        commit = commit_req(plan, "pay", res.receipt["preconditions"]).model_copy(update={"lock_tokens": tokens})
        refused.append((await payments.commit(commit)).receipt)
        payments.lock_release(release("card/4242", held.token, txn))
    assert [(r["outcome"], r["code"]) for r in refused] == [("refused", "STALE_TOKEN")] * 2
    assert "carries no fencing token" in refused[0]["reason"] and "token 99" in refused[1]["reason"]
    assert world.pay.effects == []
    plan = locking(trip_plan(clock.now(), "txn-live"), "pay", "card/4242")
    held = payments.lock_acquire(acquire("card/4242", "txn-live", 600, branch_id="pay"))
    res = await payments.prepare(prep(plan, "pay"))
    commit = commit_req(plan, "pay", res.receipt["preconditions"]).model_copy(
        update={"lock_tokens": {"card/4242": held.token}}
    )
    assert (await payments.commit(commit)).receipt["outcome"] == "ok"
    assert world.pay.effects == ["capture txn-live"]


@pytest.mark.anyio
async def test_HATP_LOCK_6_a_stale_writer_is_refused_once_another_transaction_took_the_lock_after_its_lease(
    world: World, clock: FakeClock
) -> None:
    payments = world.participants[PAYMENTS]
    stale = locking(trip_plan(clock.now(), "txn-stale"), "pay", "card/4242")
    old = payments.lock_acquire(acquire("card/4242", "txn-stale", 30, branch_id="pay"))
    prepared = await payments.prepare(prep(stale, "pay"))
    clock.advance(31)  # the stale writer stalls past its lock's lease; another transaction locks the card
    new = payments.lock_acquire(acquire("card/4242", "txn-next", 30, branch_id="pay"))
    commit = commit_req(stale, "pay", prepared.receipt["preconditions"]).model_copy(
        update={"lock_tokens": {"card/4242": old.token}}
    )
    r = (await payments.commit(commit)).receipt
    assert (r["outcome"], r["code"]) == ("refused", "STALE_TOKEN")  # HATP-LOCK-2
    assert f"the live token is {new.token}" in r["reason"]
    assert world.pay.effects == []


def test_HATP_LOCK_5_an_acquire_whose_owner_is_not_its_transaction_is_refused(world: World, clock: FakeClock) -> None:
    airline = world.participants[AIRLINE]
    with pytest.raises(HatpError) as err:
        airline.lock_acquire(acquire("seat-14C", "txn-b", txn_id="txn-a"))
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-LOCK-5", "AUTH_MISMATCH", "$.owner")
    assert airline.locks.table.holder("seat-14C", clock.now()) is None  # nothing was taken

"""The coordinator as the caller of hatp/lock/*: locks a plan's branches name are taken before their prepare,
carried by their commit and given back (spec/coordinator.md HATP-LOCK-7..9). In memory, on the fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from demo.trip_world import AIRLINE, PAYMENTS, World, build_world, trip_plan
from hatp_mcp.core.model.messages import (
    AbortRequest,
    BranchResult,
    CommitRequest,
    CompensateRequest,
    LockAcquireRequest,
    LockReleaseRequest,
    LockResult,
    PrepareRequest,
    PrepareResult,
    RenewRequest,
    StatusRequest,
    StatusResult,
)
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.plan_locks import PlanLocks, lock_lease_seconds
from hatp_mcp.runtime.participant.driver import ParticipantRuntime
from tests.locks import acquire
from tests.txn_helpers import bodies, drive

CARD = "card/tok_visa_4242"


def locking(plan: Plan, branch_id: str, *resources: str) -> Plan:
    data = plan.wire()
    for b in data["branches"]:
        if b["branchId"] == branch_id:
            b["locks"] = list(resources)
    return Plan.model_validate(data)


class Plain:
    """A participant that serves no locks: the Participant calls only, forwarded."""

    def __init__(self, inner: ParticipantRuntime, calls: list[tuple[str, Any]]) -> None:
        self.inner = inner
        self.calls = calls

    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        self.calls.append(("prepare", req.quote_only))
        return await self.inner.prepare(req)

    async def commit(self, req: CommitRequest) -> BranchResult:
        self.calls.append(("commit", req.lock_tokens))
        return await self.inner.commit(req)

    async def abort(self, req: AbortRequest) -> BranchResult:
        self.calls.append(("abort", None))
        return await self.inner.abort(req)

    async def compensate(self, req: CompensateRequest) -> BranchResult:
        return await self.inner.compensate(req)

    async def renew(self, req: RenewRequest) -> BranchResult:
        return await self.inner.renew(req)

    async def status(self, req: StatusRequest) -> StatusResult:
        return await self.inner.status(req)


class Recorded(Plain):
    """A participant that serves locks, every call recorded in order."""

    async def acquire_lock(self, req: LockAcquireRequest) -> LockResult:
        self.calls.append(("acquire", (req.resource, req.owner, req.lease_seconds)))
        return await self.inner.acquire_lock(req)

    async def release_lock(self, req: LockReleaseRequest) -> LockResult:
        self.calls.append(("release", (req.resource, req.token)))
        return await self.inner.release_lock(req)


def routed(world: World, uri: str, wrapper: type[Plain]) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []
    world.participants[uri] = wrapper(world.participants[uri], calls)  # type: ignore[assignment]
    return calls


@pytest.mark.anyio
async def test_HATP_LOCK_7_the_coordinator_locks_a_branchs_resources_before_its_prepare_and_commits_with_the_token(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    payments = world.participants[PAYMENTS]
    calls = routed(world, PAYMENTS, Recorded)
    plan = locking(trip_plan(clock.now()), "pay", CARD)
    lease = lock_lease_seconds(plan, clock.now())
    result = await drive(clock, lambda: world.coordinator().run(plan))
    assert result.outcome is Outcome.COMMITTED
    assert world.effects()["pay"] == ["capture txn-trip-0001"]
    kinds = [k for k, _ in calls]
    assert kinds.index("acquire") < kinds.index("prepare")  # HATP-LOCK-7: locked before the prepare is sent
    assert ("acquire", (CARD, plan.txn_id, lease)) in calls  # owned by the transaction, until commitBy
    assert lease == 9000  # the trip plan's commitBy is 9000 s after it was written
    assert ("commit", {CARD: 1}) in calls  # HATP-LOCK-8: the write carries the granted token
    assert payments.locks.table.holder(CARD, clock.now()) is None  # HATP-LOCK-9: given back once committed
    assert calls[-1] == ("release", (CARD, 1))


@pytest.mark.anyio
async def test_HATP_LOCK_8_the_coordinators_commit_carries_the_token_it_was_granted_and_the_write_lands(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    calls = routed(world, PAYMENTS, Recorded)
    result = await drive(clock, lambda: world.coordinator().run(locking(trip_plan(clock.now()), "pay", CARD)))
    assert [tokens for kind, tokens in calls if kind == "commit"] == [{CARD: 1}]
    assert result.outcome is Outcome.COMMITTED  # a commit without it is refused STALE_TOKEN (HATP-LOCK-6)
    assert world.effects()["pay"] == ["capture txn-trip-0001"]


@pytest.mark.anyio
async def test_HATP_LOCK_7_a_branch_naming_locks_at_a_participant_that_serves_none_aborts_and_writes_nothing(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    calls = routed(world, PAYMENTS, Plain)
    result = await drive(clock, lambda: world.coordinator().run(locking(trip_plan(clock.now()), "pay", CARD)))
    assert result.outcome is Outcome.ABORTED
    failed = [b for b in bodies(result.record, "call.failed") if b["branchId"] == "pay"]
    assert failed and failed[0]["phase"] == "prepare" and "HATP-LOCK-7" in failed[0]["reason"]
    assert ("prepare", False) not in calls  # fail closed: the prepare was never sent
    assert world.effects()["pay"] == []


@pytest.mark.anyio
async def test_HATP_LOCK_7_a_resource_another_transaction_holds_aborts_the_transaction_and_nothing_is_written(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    world.participants[AIRLINE].lock_acquire(acquire("seat/LH123/14C", "txn-other", 3600))
    plan = locking(trip_plan(clock.now()), "seat", "seat/LH123/14C")
    result = await drive(clock, lambda: world.coordinator().run(plan))
    assert result.outcome is Outcome.ABORTED
    failed = [b for b in bodies(result.record, "call.failed") if b["branchId"] == "seat"]
    assert failed and failed[0]["reason"].startswith("HATP-LOCK-1")  # the participant: another holds it
    assert world.effects()["seat"] == [] and world.effects()["pay"] == []


@pytest.mark.anyio
async def test_HATP_LOCK_9_an_aborted_transaction_gives_its_locks_back(clock: FakeClock) -> None:
    world = build_world(clock)
    payments = world.participants[PAYMENTS]
    calls = routed(world, PAYMENTS, Recorded)
    plan = locking(trip_plan(clock.now()), "pay", CARD)
    world.seat.sold_out = True  # the seat branch votes no: the transaction aborts after the card was locked
    result = await drive(clock, lambda: world.coordinator().run(plan))
    assert result.outcome is Outcome.ABORTED
    assert ("release", (CARD, 1)) in calls
    assert payments.locks.table.holder(CARD, clock.now()) is None


@pytest.mark.anyio
async def test_HATP_LOCK_8_a_replacement_coordinator_without_the_tokens_takes_the_lock_again_for_the_commit(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    payments = world.participants[PAYMENTS]
    plan = locking(trip_plan(clock.now()), "pay", CARD)
    branch = plan.branch("pay")
    first = PlanLocks()
    await first.take(payments, plan, plan.digest(), branch, clock.now())
    assert await first.tokens(payments, plan, plan.digest(), branch, clock.now()) == {CARD: 1}
    replacement = PlanLocks()  # the first coordinator's tokens lived in its memory
    tokens = await replacement.tokens(payments, plan, plan.digest(), branch, clock.now())
    assert tokens == {CARD: 2}  # the same transaction is given a new, larger token
    held = payments.locks.table.holder(CARD, clock.now())
    assert held is not None and held[:2] == (plan.txn_id, 2)

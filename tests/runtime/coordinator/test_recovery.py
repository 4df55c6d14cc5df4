"""A coordinator that stops after any durable step, or after a participant answered a commit that the coordinator
has not recorded yet (HATP-TXN-4 lets that record wait for the next forced write), and its replacement that finishes
the job (in process).

The participants (in memory here) outlive the coordinator, as remote servers would. The subprocess + SIGKILL
version of this is tests/crash/.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.messages import CommitRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.txn_api import TxnStatus
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.core.txn.status import summarize
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import TxnResult
from hatp_mcp.store.txn_log import LogEntry, LoggedTxn, SqliteTxnLog
from tests.txn_helpers import bodies, drive, events


class Stop(BaseException):
    """The coordinator process stops (after its write reached the disk)."""


class Steps:
    """Counts the steps (durable writes, commit answers) and stops the coordinator after step `stop_after`."""

    def __init__(self, stop_after: int = 0) -> None:
        self.stop_after = stop_after
        self.said: list[str] = []

    def step(self, what: str) -> None:
        self.said.append(what)
        if len(self.said) == self.stop_after:
            raise Stop


class StoppingLog:
    def __init__(self, inner: SqliteTxnLog, steps: Steps) -> None:
        self.inner = inner
        self.steps = steps

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        await self.inner.append(txn_id, entries, forced)
        self.steps.step("durable write")

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return await self.inner.load(txn_id)

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()


def all_or_nothing(world: World, txn: str) -> str:
    once = {k: sorted(set(v)) == sorted(v) for k, v in world.effects().items()}
    assert all(once.values()), f"an effect ran twice: {world.effects()}"  # no effect performed twice
    booked = [f"book {txn}" in world.seat.effects, f"book {txn}" in world.room.effects]
    paid = f"capture {txn}" in world.pay.effects
    created = f"create {txn}" in world.event.effects
    deleted = any(e.startswith("delete") for e in world.event.effects)
    if paid:
        assert all(booked) and created and not deleted
        return "all"
    assert not any(booked) and (not created or deleted)
    assert all(f"release {txn}" in e or f"hold {txn}" not in e for e in (world.seat.effects, world.room.effects))
    return "none"


def stop_on_commit_answers(world: World, steps: Steps) -> None:
    """Each participant's commit answer is a step: the answer is durable at the participant, and the coordinator
    stops before it records it."""
    for participant in world.participants.values():

        async def commit(req: CommitRequest, inner: Any = participant.commit) -> Any:
            answer = await inner(req)
            steps.step(f"{req.branch_id} answered")
            return answer

        participant.commit = commit  # type: ignore[method-assign]


async def run_full(tmp_path: Path, clock: FakeClock) -> list[str]:
    inner = SqliteTxnLog(tmp_path / "full.db")
    steps = Steps()
    world = build_world(clock, log=StoppingLog(inner, steps))  # type: ignore[arg-type]
    stop_on_commit_answers(world, steps)
    result = await drive(
        clock, lambda: world.coordinator().run(trip_plan(clock.now(), "txn-full")), busy=lambda: not inner.idle
    )
    assert result.outcome is Outcome.COMMITTED
    inner.close()
    return steps.said


async def stop_and_recover(tmp_path: Path, clock: FakeClock, stop_after: int) -> tuple[TxnStatus, TxnResult, World]:
    """Run the trip, stop the coordinator after step `stop_after`, and finish it with a replacement on the same
    log: (the status the log answered at the stop, what the replacement ended with, the world)."""
    path = tmp_path / f"stop-{stop_after}.db"
    inner = SqliteTxnLog(path)
    steps = Steps(stop_after)
    world = build_world(clock, log=StoppingLog(inner, steps))  # type: ignore[arg-type]
    stop_on_commit_answers(world, steps)
    txn = f"txn-stop-{stop_after}"
    with pytest.raises((Stop, BaseExceptionGroup)):
        await drive(
            clock,
            lambda: world.coordinator().run(trip_plan(clock.now(), txn)),
            busy=lambda: not inner.idle,
        )
    logged = await inner.load(txn)
    assert logged is not None
    answered = summarize(Plan.model_validate(logged.plan), logged.events, logged.decision)
    inner.close()
    # HATP-TXN-12: a new coordinator on the same log, same keys, same participants
    log = SqliteTxnLog(path)
    world.log = log
    replacement = world.coordinator()
    results = await drive(clock, replacement.recover_all, busy=lambda: not log.idle)
    log.close()
    assert [r.txn_id for r in results] == [txn]
    return answered, results[0], world


@pytest.mark.anyio
async def test_a_replacement_finishes_the_transaction_after_a_stop_at_every_durable_step_HATP_TXN_12(
    tmp_path: Path, clock: FakeClock
) -> None:
    said = await run_full(tmp_path, clock)
    # begin, written ahead of its prepares, and its sync (HATP-TXN-27); the prepares with the decision; the
    # calendar and the payment answered; the write that tells the outcome (HATP-TXN-25); both holds answered; the
    # close
    assert said[:6] == ["durable write"] * 3 + ["event answered", "pay answered", "durable write"], said
    assert sorted(said[6:8]) == ["room answered", "seat answered"] and said[8:] == ["durable write"], said
    outcomes = []
    for stop_after in range(1, len(said)):
        _, result, world = await stop_and_recover(tmp_path, clock, stop_after)
        txn = result.txn_id
        assert verify_record(result.record, world.keyring) == []
        assert "coordinator.recovered" in events(result.record)
        decided = bodies(result.record, "decision")
        if not decided or decided[0]["reason"].startswith("PRESUMED_ABORT"):
            assert result.outcome is Outcome.ABORTED
            approved = any(e["event"] == "approval" for e in result.record["events"])
            assert approved or ("withdraw", txn, "finance") in world.approver.calls  # the human is not left asked
        else:
            assert result.outcome is Outcome.COMMITTED
        assert all_or_nothing(world, txn) == ("all" if result.outcome is Outcome.COMMITTED else "none")
        outcomes.append(result.outcome)
    assert Outcome.COMMITTED in outcomes and Outcome.ABORTED in outcomes


@pytest.mark.anyio
async def test_an_outcome_answered_before_the_holds_commit_is_never_contradicted_by_a_stop_HATP_TXN_26(
    tmp_path: Path, clock: FakeClock
) -> None:
    said = await run_full(tmp_path, clock)
    told = said.index("pay answered") + 2  # the write after the payment's answer tells the outcome
    answered_at = []
    for stop_after in range(told - 1, len(said)):
        answered, result, world = await stop_and_recover(tmp_path, clock, stop_after)
        if answered.outcome is None:
            continue
        answered_at.append(stop_after)
        assert not answered.closed and set(answered.confirming) <= {"seat", "room"}
        # HATP-TXN-26: what the agent was told stands, whatever stopped after it
        assert result.outcome.value == answered.outcome == "COMMITTED"
        assert all_or_nothing(world, result.txn_id) == "all"
        assert verify_record(result.record, world.keyring) == []
        assert events(result.record).count("outcome.decided") == 1  # told once, not again by the replacement
    assert answered_at and answered_at[0] == told, (answered_at, said)

"""An undo whose participant cannot tell whether it happened, end to end in process: the calendar's undo gets no
answer from its upstream (the participant answers a signed in-doubt compensate receipt, as the proxy in front of an
MCP server does), and the coordinator sends it again (HATP-TXN-30) within its bound (HATP-TXN-31); the record it
closes verifies (HATP-TXN-32), and the status never says more than happened."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.txn.events import Outcome, SendCompensate
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.core.txn.status import summarize
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import TxnResult
from hatp_mcp.runtime.participant.operation import EffectInDoubt
from tests.txn_helpers import bodies, drive


def undo_unanswered(world: World, times: int) -> None:
    """The calendar's first `times` undos get no answer from its upstream: nothing is deleted, nobody can tell."""
    inner = world.event.undo
    left = [times]

    async def undo(txn_id: str, branch: Branch, undo_token: str | None, now: datetime, *, key: str) -> None:
        if left[0] > 0:
            left[0] -= 1
            raise EffectInDoubt("HATP-PXY-62", "the upstream did not answer the undo", code="UPSTREAM_NO_ANSWER")
        await inner(txn_id, branch, undo_token, now, key=key)

    world.event.undo = undo  # type: ignore[method-assign]


async def declined_trip(clock: FakeClock, doubts: int, config: Config | None = None) -> tuple[TxnResult, World, Any]:
    """The trip whose payment is declined after the calendar event was created, so the event is compensated while
    its undo gets no answer `doubts` times: (the result, the world, the coordinator runtime)."""
    world = build_world(clock)
    world.pay.decline = True
    undo_unanswered(world, doubts)
    coord = world.coordinator(config)
    result = await drive(clock, lambda: coord.run(trip_plan(clock.now())))
    return result, world, coord


def compensations(record: dict[str, Any]) -> list[str]:
    return [e["evidence"]["outcome"] for e in record["events"] if e["event"] == "compensate"]


async def status_of(world: World, txn_id: str) -> dict[str, str]:
    logged = await world.log.load(txn_id)
    assert logged is not None
    status = summarize(Plan.model_validate(logged.plan), logged.events, logged.decision)
    return {r.branch_id: r.result for r in status.results}


@pytest.mark.anyio
async def test_HATP_TXN_30_an_undo_in_doubt_once_then_ok_ends_aborted_undone_and_the_record_verifies(
    clock: FakeClock,
) -> None:
    result, world, coord = await declined_trip(clock, 1)
    assert result.outcome is Outcome.ABORTED
    assert compensations(result.record) == ["in-doubt", "ok"]
    assert [c.branch_id for _t, c in coord.trace if isinstance(c, SendCompensate)] == ["event", "event"]
    assert world.event.effects == [f"create {result.txn_id}", f"delete evt-{result.txn_id}"]  # undone once
    assert verify_record(result.record, world.keyring) == []  # HATP-TXN-32 accepts the undo sent again
    assert (await status_of(world, result.txn_id))["event"] == "undone"


@pytest.mark.anyio
async def test_HATP_TXN_31_an_undo_always_in_doubt_ends_needs_recovery_offered_and_never_said_undone(
    clock: FakeClock,
) -> None:
    result, world, _coord = await declined_trip(clock, 99)
    attempts = Config().undo_attempts
    assert result.outcome is Outcome.NEEDS_RECOVERY
    assert compensations(result.record) == ["in-doubt"] * attempts
    said = bodies(result.record, "undo.in-doubt")
    assert said == [{"branchId": "event", "phase": "compensate", "attempts": attempts}]
    offered = bodies(result.record, "recovery.offered")
    assert [o["branches"] for o in offered] == [["event"]] and offered[0]["performed"] is False
    assert world.event.effects == [f"create {result.txn_id}"]  # nothing was deleted, and nothing says it was
    assert verify_record(result.record, world.keyring) == []  # HATP-REC-16: what is left is named
    results = await status_of(world, result.txn_id)
    assert results["event"] == "in-doubt" and results["seat"] == results["room"] == "released"

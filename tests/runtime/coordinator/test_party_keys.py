"""An in-memory CoordinatorRuntime counts a participant's evidence only when the signing key is bound to that
participant (HATP-TXN-2 with HATP-SIG-6): the hotel's key cannot vote for the airline (an unbound key counting for
no one is planted in tests/core/txn/test_machine.py). No MCP link is involved: this is the check a library user
wiring the runtime directly relies on."""

from __future__ import annotations

from typing import Any

import pytest

from demo.trip_world import AIRLINE, HOTEL, World, build_world, trip_plan
from hatp_mcp.core.model.messages import PrepareRequest, PrepareResult
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime
from hatp_mcp.runtime.interfaces import Participant
from tests.txn_helpers import drive


def resigned(obj: dict[str, Any], key: SigningKey) -> dict[str, Any]:
    return sign_object({k: v for k, v in obj.items() if k != "signature"}, key)


class SignsWith:
    """The airline's participant, its answers re-signed with another key (they still name the airline)."""

    def __init__(self, inner: Participant, key: SigningKey) -> None:
        self._inner = inner
        self._key = key

    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        got = await self._inner.prepare(req)
        return got.model_copy(
            update={"vote": resigned(got.vote, self._key), "receipt": resigned(got.receipt, self._key)}
        )

    def __getattr__(self, name: str) -> Any:  # commit, abort, ...: unchanged (the abort releases the hold)
        return getattr(self._inner, name)


def runtime(world: World, keyring: Keyring, airline: Participant) -> CoordinatorRuntime:
    base = world.coordinator()
    routes: dict[str, Participant] = {**world.participants, AIRLINE: airline}
    return CoordinatorRuntime(
        key=world.keys["coordinator"],
        keyring=keyring,
        participants=routes,
        approver=world.approver,
        log=world.log,
        clock=world.clock,
        config=base.config,
    )


def refusals(record: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (e["body"]["branchId"], e["body"]["rule"], e["body"]["code"])
        for e in record["events"]
        if e["event"] == "evidence.refused"
    ]


@pytest.mark.anyio
async def test_HATP_TXN_2_the_hotels_key_signing_a_vote_that_names_the_airline_is_refused_and_the_trip_aborts(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    forger = SignsWith(world.participants[AIRLINE], world.keys["hotel"])  # a key of the same keyring, role participant
    plan = trip_plan(clock.now())
    result = await drive(clock, lambda: runtime(world, world.keyring, forger).run(plan))  # type: ignore[arg-type]
    assert result.outcome is Outcome.ABORTED
    assert ("seat", "HATP-TXN-2", "KEY_NOT_THE_PARTICIPANTS") in refusals(result.record)
    seat_votes = [e for e in result.record["events"] if e["event"] == "vote" and e["body"].get("branchId") == "seat"]
    assert seat_votes == []  # the forged vote is never chained (the seat's hold is released: its abort receipt is)
    booked = [e for e in (*world.seat.effects, *world.room.effects, *world.pay.effects) if e.split()[0] != "hold"]
    assert all(e.startswith("release") for e in booked)  # nothing booked or captured; holds released
    assert verify_record(result.record, world.keyring) == []  # what was recorded holds


@pytest.mark.anyio
async def test_keys_bound_to_their_own_participants_commit_the_trip(clock: FakeClock) -> None:
    world = build_world(clock)
    assert world.keyring.get(world.keys["hotel"].kid).party == HOTEL  # type: ignore[union-attr]
    plan = trip_plan(clock.now())
    result = await drive(clock, lambda: runtime(world, world.keyring, world.participants[AIRLINE]).run(plan))
    assert result.outcome is Outcome.COMMITTED and refusals(result.record) == []

"""The soak's real-process mode, bounded: trips over the coordinator and the four tool servers as processes, the
coordinator and two participants SIGKILLed mid-run and started again, every trip all-or-nothing by the servers'
own ledgers and its record verified; and the checks themselves catch what they exist to catch."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from hatp_mcp.core.signing.keys import Keyring
from tests.soak.processes import BLOCKED_EVERY, SERVERS, Holdings, check, soak_processes

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


async def test_trips_over_real_processes_killed_and_restarted_end_all_or_nothing_with_verified_records() -> None:
    with anyio.fail_after(600):
        report = await soak_processes(15, seed=4, concurrency=5, victims=["coordinator", "hotel", "payments"])
    assert report.violations == []
    assert sum(report.outcomes.values()) == 15
    assert report.kills == {"coordinator": 1, "hotel": 1, "payments": 1}
    assert report.outcomes["COMMITTED"] > 0
    assert report.outcomes["ABORTED"] >= len(range(0, 15, BLOCKED_EVERY))  # the blocked cards, at least


TXN = "txn-psoak-9-1"


def holdings(*, commits: set[str], undo: bool = False, held: frozenset[str] = frozenset()) -> Holdings:
    branch = {"airline": "seat", "hotel": "room", "calendar": "event", "payments": "pay"}
    effects: dict[str, set[tuple[str, str]]] = {name: set() for name in SERVERS}
    for name in commits:
        effects[name].add((f"{TXN}:{branch[name]}", "commit"))
    if undo:
        effects["calendar"].add((f"{TXN}:event", "undo"))
    return Holdings({name: {TXN: "held"} if name in held else {} for name in SERVERS}, effects)


EMPTY: dict[str, Any] = {"events": []}


@pytest.mark.parametrize(
    ("outcome", "held", "said"),
    [
        ("COMMITTED", holdings(commits={"airline", "hotel", "calendar"}), "COMMITTED but the effects made"),
        ("COMMITTED", holdings(commits=set(SERVERS), undo=True), "the event undone: True"),
        ("ABORTED", holdings(commits={"payments"}), "ABORTED but the effects made"),
        ("ABORTED", holdings(commits={"calendar"}), "ABORTED but the effects made"),
        ("ABORTED", holdings(commits=set(), held=frozenset({"hotel"})), "holds left behind: ['hotel']"),
    ],
)
async def test_the_process_soak_check_catches_a_broken_outcome(outcome: str, held: Holdings, said: str) -> None:
    found = check(TXN, outcome, EMPTY, held, Keyring())
    assert any(said in v for v in found), found


async def test_the_process_soak_check_catches_a_record_that_does_not_verify() -> None:
    found = check(TXN, "ABORTED", EMPTY, holdings(commits=set()), Keyring())
    assert [v for v in found if "record does not verify" in v] == found and found

"""A coordinator process SIGKILLed at a durable point of phase 1 or phase 2, and another coordinator process on
the same PostgreSQL log taking its transaction over once the lease lapsed (spec/store.md HATP-STORE-4..6): the
outcome is all or nothing, no effect happens twice, and the record verifies offline.

A is the real `servers.coordinator` with two observation points (tests/crash/coordinator_process_child.py): it
stops at the first durable write holding a vote (mid-phase 1, the trip run holds-first: holds placed, nothing
decided, the person not yet asked) or once two tool servers answered their commit (mid-phase 2: the decision
durable, two effects made, none of their receipts recorded by A), and is SIGKILLed there. B, a plain
`servers.coordinator` on the same log, takes the trip over at epoch 2 and finishes it: presumed abort before the
decision, commit after it (re-sent where it was done: answered, not redone).
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import PublicKeyEntry
from tests.e2e.coordinator_suite import PARTICIPANTS, Agent, problems, trip
from tests.e2e.pg_coordinators import effects, launch_coordinator, said, signers, start_receivers
from tests.postgres_cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
CHILD = "tests.crash.coordinator_process_child"
SEAT = "LH123/2026-12-10/14C"


def trip_in(mode: str, txn: str) -> Plan:
    """The suite's trip (seat 14C), run in `mode` (plan `mode`, HATP-MODE-1)."""
    wire = trip(txn, "2026-12-10", "14C").wire()
    wire["mode"] = mode
    return Plan.model_validate(wire)


async def killed_and_taken_over(
    tmp_path: Path, postgres: Cluster, txn: str, pause_at: str, mode: str = "auto"
) -> dict[str, Any]:
    """Run one trip on A until `pause_at`, SIGKILL A there, and let B finish it. Returns what the test checks."""
    async with AsyncExitStack() as stack:
        suite = await start_receivers(tmp_path, postgres, stack, ["a", "b"])
        log_url = postgres.new_database()
        a = await launch_coordinator(suite, "a", log_url, module=CHILD, extra=["--pause-at", pause_at])
        b = await launch_coordinator(suite, "b", log_url)
        with anyio.fail_after(150):
            async with a.client() as client:  # closing it after A is gone: the session's DELETE fails, ignored
                agent = Agent(client)
                await agent.begin(trip_in(mode, txn))
                if pause_at.startswith("commit:"):
                    await agent.asked(txn)
                    await suite.decide(txn, "approve")
                await said(a, "PAUSED", 60)
                a.kill()  # SIGKILL at exactly the crash point
                await a.process.wait()
            async with b.client() as client:
                done = await Agent(client).outcome(txn)
            seat = await suite.tool("airline", "seat_status", {"resource": SEAT})
        with psycopg.connect(log_url) as conn:
            lease = conn.execute("SELECT owner, epoch FROM txn_lease WHERE txn_id = %s", (txn,)).fetchone()
    kids = {PublicKeyEntry.from_jwk(json.loads((tmp_path / n / "public.jwk.json").read_text())).kid: n for n in "ab"}
    return {
        "done": done,
        "seat": (seat["state"], seat["holder"]),
        "lease": lease,
        "signers": signers(done["record"], kids),
        "steps": [line for line in a.lines if line.startswith("STEP ")],
        "effects": {n: effects(tmp_path, n) for n in PARTICIPANTS},
        "problems": problems(done["record"], tmp_path),
        "finance_votes": [
            e["body"]["branchId"]
            for e in done["record"]["events"]
            if e["event"] == "vote" and e["body"]["branchId"] == "finance"
        ],
    }


async def test_HATP_STORE_6_a_coordinator_killed_mid_phase_1_is_taken_over_and_its_trip_aborted(
    tmp_path: Path, postgres: Cluster
) -> None:
    # holds-first: the person is asked only once every vote is durable, so A's first durable vote is before the ask.
    # In parallel mode the ask races the prepares, and when the gateway's pending vote joined that first write the
    # record already showed the trip waiting only for its person: B then rightly took the approval up again
    # (HATP-TXN-22) instead of presuming abort, and waited for a person this test never sends.
    seen = await killed_and_taken_over(tmp_path, postgres, "txn-kill-p1", "write:vote", mode="holds-first")
    assert "vote" in seen["steps"][-1], seen["steps"]  # A stopped right after its first vote was durable
    assert seen["finance_votes"] == []  # ... before the person was asked: nothing decided, nobody waited for
    assert seen["done"]["outcome"] == "ABORTED"  # presumed abort: nothing was decided
    assert seen["problems"] == []
    assert seen["lease"] == ("b", 2) and seen["signers"] == ["a", "b"]
    assert seen["seat"] == ("free", None)  # the hold A placed was released by B's abort
    assert all(kind != "commit" for n in PARTICIPANTS for _key, kind in seen["effects"][n]), seen["effects"]


async def test_HATP_STORE_6_a_coordinator_killed_mid_phase_2_is_taken_over_and_its_trip_committed_once(
    tmp_path: Path, postgres: Cluster
) -> None:
    seen = await killed_and_taken_over(tmp_path, postgres, "txn-kill-p2", "commit:2")
    assert seen["steps"][-1].endswith(tuple(f"{n}.example/hatp" for n in PARTICIPANTS)), seen["steps"]
    assert sum("commit answered" in s for s in seen["steps"]) == 2  # two effects made before the kill
    assert seen["done"]["outcome"] == "COMMITTED"
    assert seen["problems"] == []
    assert seen["lease"] == ("b", 2) and seen["signers"] == ["a", "b"]
    assert seen["seat"] == ("taken", "txn-kill-p2")
    for name in PARTICIPANTS:  # each branch's effect exactly once: the two re-sent commits were answered, not redone
        assert [kind for _key, kind in seen["effects"][name]] == ["commit"], (name, seen["effects"][name])

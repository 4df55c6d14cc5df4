"""Two and three `servers.coordinator` processes on one PostgreSQL log, with the suite's four tool servers: many
concurrent trips, begun round-robin at the coordinators, each all or nothing (its effect made once at every tool
server, or at none), and each driven by exactly one owner (spec/store.md HATP-STORE-4): its lease is still at epoch
1, held by the coordinator it was begun at, and every coordinator event of its record is signed by that
coordinator's key. `HATP_TRIPS` sets how many (default 40 in make test; `make scale-out` runs 200).

The trips need no person (their plans name no approval), so the run measures the coordinators, the log and the tool
servers, not the gateway. Each branch may take up to 60 s: on a busy 2-core machine hundreds of calls queue at each
tool server, and a trip that timed out would abort (all or nothing, but not what this test is about).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import PublicKeyEntry
from hatp_mcp.mcp.call import call_raw
from tests.e2e.coordinator_suite import PARTICIPANTS, Agent, problems
from tests.e2e.pg_coordinators import effects, launch_coordinator, signers, start_receivers, unattended_trip
from tests.postgres_cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
TRIPS = int(os.environ.get("HATP_TRIPS", "40"))
BEGINS_AT_ONCE = 16
# Long enough that a coordinator driving a hundred trips on a starved machine still renews in time: with a lease of
# 2 s their leases lapsed under load and the other coordinator took them over (safe: presumed abort, all or nothing,
# but then not "one owner each", which is what this test is about; takeover has tests of its own)
LEASE = "30"  # begin calls in flight at once (each returns once its trip is durable; the trips run on)


@pytest.mark.parametrize("coordinators", [2, 3])
async def test_HATP_STORE_4_concurrent_trips_over_several_coordinators_are_all_or_nothing_each_under_one_owner(
    tmp_path: Path, postgres: Cluster, coordinators: int
) -> None:
    names = [f"c{k}" for k in range(coordinators)]
    plans = [unattended_trip("txn-many", i) for i in range(TRIPS)]
    owner_of = {p.txn_id: names[i % coordinators] for i, p in enumerate(plans)}
    done: dict[str, dict[str, Any]] = {}
    async with AsyncExitStack() as stack:
        suite = await start_receivers(tmp_path, postgres, stack, names)
        log_url = postgres.new_database()
        procs = {n: await launch_coordinator(suite, n, log_url, lease=LEASE) for n in names}
        clients = {n: await stack.enter_async_context(procs[n].client()) for n in names}
        with anyio.fail_after(600):
            limiter = anyio.CapacityLimiter(BEGINS_AT_ONCE)

            async def begin(plan: Plan) -> None:
                async with limiter:
                    # bounded generously: on a busy machine a coordinator driving a hundred trips answers slowly
                    await call_raw(clients[owner_of[plan.txn_id]], "hatp/txn/begin", plan.wire(), 300)

            async with anyio.create_task_group() as tg:
                for plan in plans:
                    tg.start_soon(begin, plan)
            for plan in plans:  # each followed at its own coordinator (a long poll there), in turn
                done[plan.txn_id] = await Agent(clients[owner_of[plan.txn_id]]).outcome(plan.txn_id)
        with psycopg.connect(log_url) as conn:
            leases = dict(
                (str(t), (str(o), int(e))) for t, o, e in conn.execute("SELECT txn_id, owner, epoch FROM txn_lease")
            )
    kids = {PublicKeyEntry.from_jwk(json.loads((tmp_path / n / "public.jwk.json").read_text())).kid: n for n in names}
    ledgers = {n: effects(tmp_path, n) for n in PARTICIPANTS}
    for name, ledger in ledgers.items():  # no effect twice (and no undo: nothing was committed, then aborted)
        assert len(ledger) == len(set(ledger)) and {kind for _key, kind in ledger} <= {"commit"}, name
    made = Counter(key.split(":")[0] for ledger in ledgers.values() for key, _kind in ledger)
    outcomes = Counter(d["outcome"] for d in done.values())
    refused = Counter(
        str(e["body"].get("reason"))[:80]
        for d in done.values()
        if d["outcome"] != "COMMITTED"
        for e in d["record"]["events"]
        if e["event"] == "decision"
    )
    for txn_id, status in done.items():
        assert status["outcome"] in ("COMMITTED", "ABORTED"), (txn_id, status["outcome"])
        # all or nothing: the trip's effect at all four tool servers, or at none
        assert made[txn_id] == (len(PARTICIPANTS) if status["outcome"] == "COMMITTED" else 0), (txn_id, made[txn_id])
        assert leases[txn_id] == (owner_of[txn_id], 1), (txn_id, leases[txn_id])  # never taken over
        assert signers(status["record"], kids) == [owner_of[txn_id]], txn_id  # one owner drove it, alone
        assert problems(status["record"], tmp_path) == [], txn_id
    # a trip aborts here only when a tool server's answer was lost on a starved machine (seen: 1 in 200 at load 17)
    assert all(reason.startswith("PREPARE_FAILED") for reason in refused), refused
    assert outcomes["COMMITTED"] >= TRIPS * 0.95, (outcomes, refused)

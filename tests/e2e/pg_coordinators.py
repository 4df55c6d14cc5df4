"""Several `servers.coordinator` processes on one PostgreSQL log, with the suite's tool servers and gateway, for the
multi-coordinator fault tests (spec/store.md HATP-STORE-4..6, spec/mcp-binding.md HATP-TRUST-9).

`start_receivers` starts the four tool servers and the gateway, each on its own database, each trusting the keys of
every named coordinator under the one coordinator id; `launch_coordinator` starts one coordinator (or a crash-point
child, tests/crash/coordinator_process_child.py) on the shared log with a short lease; `said` waits, bounded, for a
line on a process's stderr; `effects` reads a tool server's effect ledger once it stopped; `signers` says which
coordinator process signed each run of a record's events; `unattended_trip` is a trip without an approval.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import anyio

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.mcp.launch import HttpProcess, launch_http
from tests.acme_org import ORG_DIR
from tests.coordinators import COORDINATOR, trust_coordinator_dirs
from tests.e2e.coordinator_suite import GATEWAY_ARGS, PARTICIPANTS, agent_caller, trip, uri
from tests.e2e.test_postgresql_suite import PgSuite
from tests.postgres_cluster import Cluster

__all__ = ["LEASE", "effects", "launch_coordinator", "said", "signers", "start_receivers", "unattended_trip"]

LEASE = "2"  # seconds: a coordinator stopped or killed loses its transactions about 2 s later


async def start_receivers(data: Path, postgres: Cluster, stack: AsyncExitStack, coordinators: Sequence[str]) -> PgSuite:
    """The tool servers and the gateway on PostgreSQL, trusting every coordinator in `coordinators` (their data
    folders under `data`; their keys are made now, as each would on its first start)."""
    suite = PgSuite(data, postgres, stack)
    for name, extra in [*((n, []) for n in PARTICIPANTS), ("gateway", ["--org", str(ORG_DIR)])]:
        trust_coordinator_dirs([data / name], [data / c for c in coordinators])
        suite.stores[name] = postgres.new_database()
        suite.procs[name] = await stack.enter_async_context(
            launch_http(f"servers.{name}", data / name, extra=[*extra, "--store", suite.stores[name]], ready_timeout=60)
        )
    return suite


async def launch_coordinator(
    suite: PgSuite,
    name: str,
    log_url: str,
    *,
    routes: Mapping[str, str] | None = None,
    module: str = "servers.coordinator",
    lease: str = LEASE,
    extra: Sequence[str] = (),
) -> HttpProcess:
    """One coordinator process (owner `name`, data folder `name`) on the shared log, its leases `lease` seconds long.
    `routes`: where it reaches each tool server (default: the servers themselves)."""
    to = {n: suite.procs[n].url for n in PARTICIPANTS} | dict(routes or {})
    args = [f"--participant={uri(n)}={to[n]}" for n in PARTICIPANTS]
    args += [f"--participant-keys={uri(n)}={suite.data / n / 'public.jwk.json'}" for n in PARTICIPANTS]
    args += ["--gateway", suite.procs["gateway"].url, *GATEWAY_ARGS, "--poll-seconds", "1", "--retry-seconds", "1"]
    args += ["--store", log_url, "--owner", name, "--lease-seconds", lease, "--call-timeout", "60", *extra]
    callers, token = agent_caller(suite.data / name)  # the travel-bot calls it over HTTP (HATP-MCP-53)
    launched = launch_http(module, suite.data / name, extra=[*args, *callers], ready_timeout=60, token=token)
    return await suite.stack.enter_async_context(launched)


async def said(proc: HttpProcess, text: str, seconds: float = 30) -> None:
    """Wait, bounded, until another process's stderr (read by its launcher's own task) holds `text`: looked at every
    50 ms, as nothing else signals it. Not a timed assertion: a process that never says it fails the test."""
    with anyio.fail_after(seconds):
        while not any(text in line for line in proc.lines):  # noqa: ASYNC110 (another task's lines; no event)
            await anyio.sleep(0.05)


def unattended_trip(prefix: str, i: int) -> Plan:
    """Trip i: its own seat, check-in day and calendar slot; no approval (no person in the loop); each branch
    bounded at 60 s (on a busy 2-core machine hundreds of calls queue at each tool server)."""
    day = (date(2026, 12, 10) + timedelta(days=i)).isoformat()
    wire = trip(f"{prefix}-{i:04d}", day, f"{i % 60 + 1}{'ABCDEF'[i // 60 % 6]}").wire()
    wire["approvals"] = []
    wire.pop("escalation", None)
    for branch in wire["branches"]:
        branch["maxDurationSeconds"] = 60
    return Plan.model_validate(wire)


def effects(data: Path, server: str) -> list[tuple[str, str]]:
    """(key, kind) of every effect in a stopped tool server's ledger (DATA/inventory.db), oldest first."""
    with sqlite3.connect(data / server / "inventory.db") as db:
        return [(str(k), str(kind)) for k, kind in db.execute("SELECT key, kind FROM effects ORDER BY seq")]


def signers(record: Mapping[str, Any], kids: Mapping[str, str]) -> list[str]:
    """Which coordinator process signed `record`'s coordinator events, in order, one entry per run: ["a"] for a
    record one coordinator wrote alone, ["a", "b"] for one that b took over from a. `kids`: key id -> name."""
    runs: list[str] = []
    for event in record["events"]:
        if event.get("author") != COORDINATOR:
            continue
        name = kids[event["signature"]["kid"]]
        if not runs or runs[-1] != name:
            runs.append(name)
    return runs

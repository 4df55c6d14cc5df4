"""The whole suite on PostgreSQL, as real processes: the coordinator's log, the gateway's asks and each tool
server's branch state in a real (throwaway) PostgreSQL, chosen by `--store postgresql://...`. A trip commits once
a person approves; PostgreSQL restarted (`pg_ctl restart -m fast`) while the person decides: every process
reconnects and the trip still commits, its record verifies, and the log holds it closed. A coordinator whose
store cannot be used exits 2 with one line naming why (unreachable; a newer schema, HATP-STORE-1)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from secrets import token_hex
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest

from demo.trip_suite import human_key_file
from hatp_mcp.core.gateway.proof import sign_decision
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.mcp.launch import HttpProcess, launch_http
from servers.coordinator import main as coordinator_main
from tests.acme_org import ORG_DIR
from tests.coordinators import trust_coordinator_dirs
from tests.e2e.coordinator_suite import GATEWAY_ARGS, PARTICIPANTS, Agent, agent_caller, problems, trip, uri
from tests.postgres_cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


class PgSuite:
    def __init__(self, data: Path, cluster: Cluster, stack: AsyncExitStack) -> None:
        self.data = data
        self.cluster = cluster
        self.stack = stack
        self.procs: dict[str, HttpProcess] = {}
        self.stores: dict[str, str] = {}

    async def start(self, name: str, module: str, extra: list[str]) -> HttpProcess:
        if name != "coordinator":  # each receiver acts for the suite's coordinator only (HATP-TRUST-10)
            trust_coordinator_dirs([self.data / name], [self.data / "coordinator"])
        self.stores[name] = self.cluster.new_database()  # one database per server
        callers, token = agent_caller(self.data / name) if name == "coordinator" else ([], None)  # HATP-MCP-53
        launched = launch_http(
            module,
            self.data / name,
            extra=[*extra, *callers, "--store", self.stores[name]],
            ready_timeout=60,
            token=token,
        )
        self.procs[name] = await self.stack.enter_async_context(launched)
        return self.procs[name]

    def coordinator_args(self) -> list[str]:
        args = [f"--participant={uri(n)}={self.procs[n].url}" for n in PARTICIPANTS]
        args += [f"--participant-keys={uri(n)}={self.data / n / 'public.jwk.json'}" for n in PARTICIPANTS]
        return [*args, "--gateway", self.procs["gateway"].url, *GATEWAY_ARGS, "--poll-seconds", "1"]

    async def decide(self, txn_id: str, action: str) -> dict[str, Any]:
        ask_id = f"{txn_id}/finance"
        shown = await self.tool("gateway", "show_ask", {"ask_id": ask_id})
        who = shown["waitingFor"][0]
        key = SigningKey.from_jwk(json.loads(human_key_file(who).read_text()))
        proof = sign_decision(key, ask_id, shown["subjectDigest"], who, action, datetime.now(UTC), nonce=token_hex(12))
        return await self.tool("gateway", "decide", {"ask_id": ask_id, "proof": proof.wire()})

    async def tool(self, server: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        async with self.procs[server].client() as client:
            result = await client.call_tool(name, args)
        assert result.structured_content is not None
        return result.structured_content


@pytest.fixture
async def suite(tmp_path: Path, postgres: Cluster) -> AsyncIterator[PgSuite]:
    async with AsyncExitStack() as stack:
        s = PgSuite(tmp_path, postgres, stack)
        for name in PARTICIPANTS:
            await s.start(name, f"servers.{name}", [])
        await s.start("gateway", "servers.gateway", ["--org", str(ORG_DIR)])
        await s.start("coordinator", "servers.coordinator", s.coordinator_args())
        yield s


def closed_in_log(url: str, txn_id: str) -> tuple[bool, str | None]:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT closed, decision FROM txn WHERE txn_id = %s", (txn_id,)).fetchone()
    assert row is not None
    return bool(row[0]), row[1]


async def test_a_trip_commits_with_every_store_on_postgresql_and_survives_a_restart_of_postgresql(
    suite: PgSuite,
) -> None:
    # flushed first, as before a planned restart: the outage is then the restart's own, not its shutdown checkpoint
    # syncing every file the session dirtied (each database earlier tests made), which can outlast a pool's wait
    await anyio.to_thread.run_sync(suite.cluster.checkpoint)
    with anyio.fail_after(120):
        async with suite.procs["coordinator"].client() as client:
            agent = Agent(client)
            await agent.begin(trip("txn-pg-1", "2026-12-10", "14C"))
            await agent.asked("txn-pg-1")
            await suite.decide("txn-pg-1", "approve")
            first = await agent.outcome("txn-pg-1")

            await agent.begin(trip("txn-pg-2", "2026-12-11", "15C"))
            await agent.asked("txn-pg-2")  # the holds are placed, the person is asked ...
            await anyio.to_thread.run_sync(suite.cluster.restart, "fast")  # ... and PostgreSQL restarts
            await suite.decide("txn-pg-2", "approve")
            second = await agent.outcome("txn-pg-2")
        seat = await suite.tool("airline", "seat_status", {"resource": "LH123/2026-12-10/15C"})
    for done, txn in ((first, "txn-pg-1"), (second, "txn-pg-2")):
        assert done["outcome"] == "COMMITTED"
        assert problems(done["record"], suite.data) == []
        assert closed_in_log(suite.stores["coordinator"], txn) == (True, "commit")
    assert (seat["state"], seat["holder"]) == ("taken", "txn-pg-2")
    with psycopg.connect(suite.stores["airline"]) as conn:  # the airline's answers are in its own database
        rows = conn.execute("SELECT txn_id FROM branch_state ORDER BY txn_id").fetchall()
        bound = conn.execute("SELECT txn_id, coordinator FROM txn_bindings ORDER BY txn_id").fetchall()
    assert rows == [("txn-pg-1",), ("txn-pg-2",)]
    assert bound == [("txn-pg-1", "coordinator://localhost"), ("txn-pg-2", "coordinator://localhost")]  # and there
    assert not (suite.data / "airline" / "coordinators.db").exists()


def test_a_coordinator_whose_store_cannot_be_reached_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--data", str(tmp_path), "--scripted-approver", "approve", "--store", "postgresql://hatp@127.0.0.1:9/x"]
    assert coordinator_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("coordinator: cannot start: postgresql://127.0.0.1:9/x:") and "Traceback" not in err
    assert "no connection within" in err


def test_a_coordinator_on_a_database_with_a_newer_schema_exits_2_under_HATP_STORE_1(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE hatp_schema (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        conn.execute("INSERT INTO hatp_schema VALUES ('coordinator.log', 99)")
    assert coordinator_main(["--data", str(tmp_path), "--scripted-approver", "approve", "--store", pg_url]) == 2
    err = capsys.readouterr().err
    assert "HATP-STORE-1" in err and "version 99, newer than this code's 2" in err and "Traceback" not in err
    with psycopg.connect(pg_url) as conn:  # nothing was created beside it
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    assert tables == [("hatp_schema",)]

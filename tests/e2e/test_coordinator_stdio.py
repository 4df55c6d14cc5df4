"""The coordinator as a real stdio child of the agent, its participants and the Human Gateway as stdio children of
the coordinator (named in a --participants CONFIG file). People decide in the terminal inbox, another process
sharing the gateway's store. Commit; the approver says no; a participant process killed mid-transaction is
started again by the coordinator (HATP-MCP-26). One coordinator for the module."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from demo.trip_suite import human_key_file
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.launch import stdio_params
from tests.acme_org import ORG_DIR, h
from tests.coordinators import trust_coordinator_dirs
from tests.e2e.coordinator_suite import (
    GATEWAY_ARGS,
    PARTICIPANTS,
    Agent,
    alive,
    child_pids,
    events,
    problems,
    trip,
    uri,
)

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HATP = str(Path(sys.executable).parent / "hatp")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("coordinator-stdio")


@pytest.fixture(scope="module")
async def agent(data: Path) -> AsyncIterator[Agent]:
    config = {
        "participants": {
            uri(n): {"module": f"servers.{n}", "data": str(data / n), "keys": str(data / n / "public.jwk.json")}
            for n in PARTICIPANTS
        },
        "gateway": {"module": "servers.gateway", "data": str(data / "gateway"), "args": ["--org", str(ORG_DIR)]},
    }
    (data / "suite.json").write_text(json.dumps(config))
    # the coordinator's key, made before it starts, is the one its stdio children act for (HATP-TRUST-10)
    trust_coordinator_dirs([data / n for n in (*PARTICIPANTS, "gateway")], [data / "coordinator"])
    extra = ["--participants", str(data / "suite.json"), *GATEWAY_ARGS, "--poll-seconds", "1", "--retry-seconds", "1"]
    with (data / "coordinator.stderr").open("w") as errlog:
        params = stdio_params("servers.coordinator", data / "coordinator", extra)
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield Agent(client)


async def inbox(data: Path, action: str, txn_id: str, who: str = "bob") -> str:
    key = str(human_key_file(h(who)))  # the person signs their decision with their own key (TEST-ONLY)
    cmd = [HATP, "inbox", "--data", str(data / "gateway"), action, f"{txn_id}/finance", "--as", h(who), "--key", key]
    done = await anyio.run_process(cmd, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def coordinator_pid() -> int:
    [pid] = child_pids(os.getpid(), "servers.coordinator")
    return pid


async def test_HATP_MCP_20_over_stdio_the_trip_commits_once_a_person_approves_in_the_inbox(
    data: Path, agent: Agent
) -> None:
    with anyio.fail_after(90):
        await agent.begin(trip("txn-s-commit", "2026-12-10", "21C"))
        await agent.asked("txn-s-commit")
        await inbox(data, "approve", "txn-s-commit")
        done = await agent.outcome("txn-s-commit")
    assert done["outcome"] == "COMMITTED"
    assert problems(done["record"], data) == []


async def test_over_stdio_the_approver_saying_no_in_the_inbox_aborts_the_trip(data: Path, agent: Agent) -> None:
    with anyio.fail_after(90):
        await agent.begin(trip("txn-s-no", "2026-12-11", "22C"))
        await agent.asked("txn-s-no")
        await inbox(data, "reject", "txn-s-no")
        done = await agent.outcome("txn-s-no")
    assert done["outcome"] == "ABORTED" and "approval" in events(done["record"])
    assert problems(done["record"], data) == []


async def test_HATP_MCP_26_a_stdio_participant_killed_mid_transaction_is_started_again_and_the_trip_commits(
    data: Path, agent: Agent
) -> None:
    with anyio.fail_after(120):
        await agent.begin(trip("txn-s-killed", "2026-12-12", "23C"))
        await agent.asked("txn-s-killed")
        [hotel] = child_pids(coordinator_pid(), "servers.hotel")
        os.kill(hotel, signal.SIGKILL)  # the room is held; the hotel's state is in SQLite under its --data
        await inbox(data, "approve", "txn-s-killed")
        done = await agent.outcome("txn-s-killed")
        restarted = child_pids(coordinator_pid(), "servers.hotel")
    assert done["outcome"] == "COMMITTED"
    assert not alive(hotel) or hotel not in restarted
    assert len(restarted) == 1 and restarted != [hotel]
    assert problems(done["record"], data) == []


async def test_HATP_TXN_21_over_stdio_a_plan_naming_another_requester_is_refused_and_nothing_begins(
    agent: Agent,
) -> None:
    """The coordinator holds the travel-bot's key (it acts for dana): a client writing bob as the requester gets
    no transaction, so bob's approvers never see dana's agent's plan as bob's."""
    plan = trip("txn-s-as-bob", "2026-12-13", "24C")
    as_bob = Plan.model_validate({**plan.wire(), "requester": {"principal": h("bob"), "agent": plan.requester.agent}})
    with anyio.fail_after(30):
        with pytest.raises(HatpError) as err:
            await agent.begin(as_bob)
        with pytest.raises(HatpError) as unknown:
            await agent.status("txn-s-as-bob")
    assert (err.value.rule, err.value.path) == ("HATP-TXN-21", "$.requester.principal")
    assert unknown.value.code == "UNKNOWN_TXN"

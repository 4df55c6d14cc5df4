"""A tool server as a real process, over streamable HTTP and over stdio: the binding end to end."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import AbortRequest, StatusRequest
from hatp_mcp.errors import TransportFailed
from hatp_mcp.mcp.extension import EXPERIMENTAL_KEY, read_advertisement
from hatp_mcp.mcp.launch import HttpProcess, launch_http, stdio_params
from tests.coordinators import commit_request, trusting
from tests.e2e.plans import keyring_of, live_plan, participant, prepare_for

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
AIRLINE = "mcp://airline.example/hatp"
PAYMENTS = "mcp://payments.example/hatp"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e-participants")


@pytest.fixture(scope="module")
async def airline(data: Path) -> AsyncIterator[HttpProcess]:
    async with launch_http("servers.airline", trusting(data / "airline"), extra=["--demo-tools"]) as proc:
        yield proc


@pytest.fixture(scope="module")
async def payments(data: Path) -> AsyncIterator[HttpProcess]:
    async with launch_http("servers.payments", trusting(data / "payments"), extra=["--commit-delay", "1.5"]) as proc:
        yield proc


async def test_HATP_MCP_5_a_hold_prepared_on_one_connection_commits_on_another(
    airline: HttpProcess, data: Path
) -> None:
    plan = live_plan("txn-e2e-commit", seat={"seat": "1A"})
    req = prepare_for(plan, "seat")
    ring = keyring_of(data / "airline")
    with anyio.fail_after(20):
        async with Client(airline.url) as first:
            prepared = await participant(AIRLINE, first, ring).prepare(req)
        async with Client(airline.url) as second:
            part = participant(AIRLINE, second, ring)
            pre = Preconditions.model_validate(prepared.receipt["preconditions"])
            commit = commit_request(
                prepared.vote, txn_id=req.txn_id, branch_id="seat", plan_digest=req.plan_digest, preconditions=pre
            )
            done = await part.commit(commit)
            seat = await second.call_tool("seat_status", {"resource": "LH123/2026-12-10/1A"})
    assert prepared.vote["decision"] == "yes"
    assert done.receipt["outcome"] == "ok"
    assert seat.structured_content is not None
    assert seat.structured_content["state"] == "taken"


async def test_a_change_after_prepare_refuses_the_commit_with_precondition_changed(
    airline: HttpProcess, data: Path
) -> None:
    plan = live_plan("txn-e2e-moved", seat={"seat": "2B"})
    req = prepare_for(plan, "seat")
    with anyio.fail_after(20):
        async with Client(airline.url) as client:
            part = participant(AIRLINE, client, keyring_of(data / "airline"))
            prepared = await part.prepare(req)
            await client.call_tool("seat_change", {"resource": "LH123/2026-12-10/2B", "state": "held"})
            pre = Preconditions.model_validate(prepared.receipt["preconditions"])
            refused = await part.commit(
                commit_request(
                    prepared.vote, txn_id=req.txn_id, branch_id="seat", plan_digest=req.plan_digest, preconditions=pre
                )
            )
    assert (refused.receipt["outcome"], refused.receipt["code"]) == ("refused", "PRECONDITION_CHANGED")


async def test_HATP_MCP_6_a_final_step_that_outlasts_the_request_timeout_is_in_doubt_then_answers(
    payments: HttpProcess, data: Path
) -> None:
    plan = live_plan("txn-e2e-doubt")
    req = prepare_for(plan, "pay")
    ring = keyring_of(data / "payments")
    with anyio.fail_after(30):
        async with Client(payments.url) as client:
            part = participant(PAYMENTS, client, ring, timeout=0.3)
            prepared = await part.prepare(req)
            pre = Preconditions.model_validate(prepared.receipt["preconditions"])
            commit = commit_request(
                prepared.vote, txn_id=req.txn_id, branch_id="pay", plan_digest=req.plan_digest, preconditions=pre
            )
            with pytest.raises(TransportFailed) as info:
                await part.commit(commit)
            patient = participant(PAYMENTS, client, ring, timeout=10)
            answered = await patient.commit(commit)  # the same request again: the first (and only) commit's answer
            status = await patient.status(StatusRequest(txn_id=req.txn_id, branch_id="pay"))
    assert (info.value.rule, info.value.code) == ("HATP-MCP-6", "TIMEOUT")
    assert answered.receipt["outcome"] == "ok"
    assert status.state == "committed"


async def test_HATP_MCP_8_a_restarted_server_keeps_its_key_and_its_state(data: Path) -> None:
    plan = live_plan("txn-e2e-restart", room={"checkIn": "2026-12-24"})
    req = prepare_for(plan, "room")
    hotel = data / "hotel"
    with anyio.fail_after(40):
        async with launch_http("servers.hotel", trusting(hotel)) as proc:
            async with Client(proc.url) as client:
                await participant("mcp://hotel.example/hatp", client, keyring_of(hotel)).prepare(req)
            key_before = json.loads((hotel / "key.jwk.json").read_text())
            code = await proc.stop()
        async with launch_http("servers.hotel", trusting(hotel)) as proc:
            async with Client(proc.url) as client:
                part = participant("mcp://hotel.example/hatp", client, keyring_of(hotel))
                status = await part.status(StatusRequest(txn_id=req.txn_id, branch_id="room"))
    assert code == 0  # HATP-MCP-7: SIGTERM ends the server with status 0
    assert json.loads((hotel / "key.jwk.json").read_text()) == key_before
    assert status.state == "prepared"
    assert (hotel / "key.jwk.json").stat().st_mode & 0o777 == 0o600


async def test_HATP_MCP_7_over_stdio_a_legacy_client_reads_hatp_under_experimental_and_aborts(data: Path) -> None:
    plan = live_plan("txn-e2e-stdio", event={"start": "2026-12-11T09:00:00Z"})
    calendar = data / "calendar"
    with anyio.fail_after(30), (calendar.parent / "calendar.stderr").open("w") as errlog:
        transport = stdio_client(stdio_params("servers.calendar", trusting(calendar)), errlog=errlog)
        async with Client(transport, mode="legacy") as client:
            caps = client.server_capabilities
            hatp = read_advertisement(caps)
            part = participant("mcp://calendar.example/hatp", client, keyring_of(calendar))
            req = prepare_for(plan, "event")
            prepared = await part.prepare(req)
            aborted = await part.abort(AbortRequest(txn_id=req.txn_id, branch_id="event", plan_digest=req.plan_digest))
    assert caps.experimental is not None and EXPERIMENTAL_KEY in caps.experimental
    assert hatp["operations"]["event.create"]["tier"] == "compensate"
    assert prepared.vote["decision"] == "yes"
    assert aborted.receipt["outcome"] == "ok"


async def test_a_killed_server_cannot_be_reached_and_its_prepared_hold_survives_the_restart(data: Path) -> None:
    plan = live_plan("txn-e2e-kill", seat={"seat": "30F"})
    req = prepare_for(plan, "seat")
    airline = data / "airline-kill"
    with anyio.fail_after(40):
        async with launch_http("servers.airline", trusting(airline)) as proc:
            ring = keyring_of(airline)
            async with Client(proc.url) as client:
                await participant(AIRLINE, client, ring).prepare(req)
            port = proc.port
            proc.kill()
            await proc.process.wait()
            with pytest.raises(ExceptionGroup) as info:  # the SDK fails to open a client to a dead server
                async with Client(proc.url) as client:
                    await participant(AIRLINE, client, ring).status(StatusRequest(txn_id=req.txn_id, branch_id="seat"))
        async with launch_http("servers.airline", trusting(airline), port=port) as proc:
            async with Client(proc.url) as client:
                status = await participant(AIRLINE, client, ring).status(
                    StatusRequest(txn_id=req.txn_id, branch_id="seat")
                )
    assert info.group_contains(httpx2.ConnectError)
    assert status.state == "prepared"


async def test_a_server_refuses_to_start_beside_an_inventory_kept_apart_from_its_state(tmp_path: Path) -> None:
    data = tmp_path / "airline"
    data.mkdir()
    (data / "inventory.db").write_bytes(b"")  # an older layout: the inventory apart from state.db
    params = stdio_params("servers.airline", trusting(data))
    with anyio.fail_after(60):
        done = await anyio.run_process([params.command, *params.args], cwd=params.cwd, check=False)
    assert done.returncode == 2 and b"inventory.db" in done.stderr  # fail closed: never two inventories
    assert not (data / "state.db").exists()

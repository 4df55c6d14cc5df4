"""A receiver's trust list and a coordinator's signing, with the real coordinator runtime driving the trip world's
participants over in-memory MCP (spec/mcp-binding.md HATP-TRUST-10..12)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.server import MCPServer

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.mcp.extension import HatpSettings
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.mcp.participant_server import serve_hatp
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime, default_validator
from hatp_mcp.runtime.coordinator_trust import (
    TRUST_FILE,
    RequestSigner,
    TrustedCoordinators,
    load_trust_list,
    open_trust,
    write_trust_list,
)
from hatp_mcp.runtime.interfaces import Participant
from tests.coordinators import COORDINATOR, KEY
from tests.txn_helpers import drive, settle

C1 = "coordinator://acme.com/c1"
BRANCHES = ("seat", "room", "event", "pay")


def test_HATP_TRUST_10_a_trust_list_key_without_the_coordinator_role_or_a_party_stops_the_server(
    tmp_path: Path,
) -> None:
    unbound = tmp_path / "unbound.json"
    unbound.write_text(json.dumps(KEY.public_jwk()))
    with pytest.raises(ValueError, match="names no 'party'"):
        load_trust_list(unbound)
    wrong_role = tmp_path / "participant.json"
    wrong_role.write_text(json.dumps(SigningKey.generate(["participant"]).public_jwk(COORDINATOR)))
    with pytest.raises(ValueError, match="lacks the role 'coordinator'"):
        load_trust_list(wrong_role)
    with pytest.raises(ValueError, match="names no 'party'"):
        open_trust(tmp_path / "data", str(unbound), FakeClock())
    # `ID=FILE` binds a bare key (such as a coordinator's public.jwk.json) to that coordinator id
    trust = open_trust(tmp_path / "data", f"{COORDINATOR}={unbound}", FakeClock())
    assert trust.keyring is not None and [e.party for e in trust.keyring.entries()] == [COORDINATOR]


def test_HATP_TRUST_10_the_default_trust_list_is_the_one_under_the_servers_data_and_none_means_none(
    tmp_path: Path,
) -> None:
    assert open_trust(tmp_path / "fresh", None, FakeClock()).keyring is None  # HATP-TRUST-6 then refuses
    write_trust_list(tmp_path / "kept", {COORDINATOR: KEY.public_jwk()})
    trust = open_trust(tmp_path / "kept", None, FakeClock())
    assert trust.keyring is not None and trust.keyring.get(KEY.kid) is not None
    assert (tmp_path / "kept" / TRUST_FILE).is_file() and (tmp_path / "kept" / "coordinators.db").is_file()


@asynccontextmanager
async def over_mcp(world: World, trusted: SigningKey, signing: SigningKey) -> AsyncIterator[CoordinatorRuntime]:
    """The trip world's four participants as MCP servers trusting `trusted` (as C1), and a coordinator C1 that signs
    with `signing`, reaching them over in-memory MCP clients."""
    async with AsyncExitStack() as stack:
        routes: dict[str, Participant] = {}
        for uri, runtime in world.participants.items():
            server = MCPServer(uri, log_level="WARNING")
            pinned = Keyring()
            pinned.add_signer(trusted, C1)
            trust = TrustedCoordinators(pinned, world.clock)
            serve_hatp(server, runtime, HatpSettings(roles=["participant"]), trust=trust)
            client = await stack.enter_async_context(Client(server))
            sign = RequestSigner(signing, C1, world.clock).sign
            routes[uri] = mcp_participant(uri, client, world.keyring, verify=False, signer=sign)
        yield CoordinatorRuntime(
            key=world.keys["coordinator"],
            keyring=world.keyring,
            participants=routes,
            approver=world.approver,
            log=world.log,
            clock=world.clock,
            config=Config(coordinator=C1),
            validator=default_validator(),
        )


@pytest.mark.anyio
async def test_HATP_TRUST_11_a_coordinator_signing_every_request_runs_the_trip_to_commit_over_mcp(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    coordinator = world.keys["coordinator"]
    async with over_mcp(world, coordinator, coordinator) as runtime:
        result = await drive(clock, lambda: runtime.run(trip_plan(clock.now())))
    assert result.outcome is Outcome.COMMITTED
    assert world.effects()["pay"] == ["capture txn-trip-0001"]


@pytest.mark.anyio
async def test_HATP_TRUST_12_a_coordinator_its_participants_do_not_trust_decides_abort_and_nothing_happens(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    impostor = SigningKey.generate(["coordinator"])  # signs as C1, but is not the key the participants pinned
    async with over_mcp(world, world.keys["coordinator"], impostor) as runtime:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(runtime.run, trip_plan(clock.now()))
                for _ in range(5):  # it decides abort, then keeps asking for the aborts the participants refuse
                    await settle()
                    clock.advance(30)
                await settle()
                logged = await world.log.load("txn-trip-0001")
                tg.cancel_scope.cancel()
    assert logged is not None and logged.decision == "abort"
    assert world.effects() == {"seat": [], "room": [], "event": [], "pay": []}
    failed = [e["body"] for e in logged.events if e["event"] == "call.failed"]
    assert {b["phase"] for b in failed} >= {"prepare", "abort"}
    assert all("HATP-TRUST-2" in b["reason"] for b in failed), failed  # refusals, never votes
    assert not [e for e in logged.events if e["event"] == "vote" and e["body"].get("branchId") in BRANCHES]

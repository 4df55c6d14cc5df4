"""A toy participant for binding tests: the real ParticipantRuntime with a seat-hold operation kept in memory."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mcp.server import MCPServer

from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.participant.branch import Lease
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.mcp.extension import HatpSettings, OperationInfo
from hatp_mcp.mcp.participant_server import serve_hatp
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.participant.driver import DryRun, Operation, ParticipantRuntime
from hatp_mcp.store.participant_state import MemoryParticipantStore
from tests.coordinators import signer, trusted
from tests.factories import trip_plan_json

__all__ = ["AIRLINE", "SeatHold", "Toy", "plan", "toy_server"]

AIRLINE = "mcp://airline.example/hatp"


class SeatHold(Operation):
    def __init__(self) -> None:
        self.version = "v1"
        self.held: set[str] = set()
        self.booked: set[str] = set()
        self.sold_out = False

    async def dry_run(self, branch: Branch, now: datetime) -> DryRun:
        if self.sold_out:
            return DryRun(refuse_code="SOLD_OUT", refuse_reason="no seat left")
        return DryRun(versions={"seat/14C": self.version}, cost=branch.amount)

    async def place_hold(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        self.held.add(txn_id)

    async def release_hold(self, txn_id: str, branch: Branch) -> None:
        self.held.discard(txn_id)

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        self.held.discard(txn_id)
        self.booked.add(txn_id)
        return None


class Toy:
    def __init__(self, clock: Clock) -> None:
        self.key = SigningKey.generate(["participant"])
        self.op = SeatHold()
        self.runtime = ParticipantRuntime(AIRLINE, self.key, {"seat.hold": self.op}, MemoryParticipantStore(), clock)
        self.keyring = Keyring()
        self.keyring.add_signer(self.key)
        self.trust = trusted(clock)  # the toy acts for the test coordinator only (HATP-TRUST-1..9)
        self.signer = signer(clock)  # that coordinator's auth on every state-changing request


def toy_server(toy: Toy, *, serve_locks: bool = True) -> MCPServer:
    server = MCPServer("toy-airline", version="0.0.1")

    @server.tool()
    def seats_left() -> int:
        """An ordinary tool that must keep working next to HATP."""
        return 7

    settings = HatpSettings(
        roles=["participant"],
        operations={"seat.hold": OperationInfo("hold", 900, 14400)},
        keys=[toy.key.public_jwk()],
    )
    serve_hatp(server, toy.runtime, settings, trust=toy.trust, serve_locks=serve_locks)
    return server


def plan(txn_id: str = "txn-toy-0001", **seat: Any) -> Plan:
    """The trip plan (its seat branch is the toy's)."""
    data = trip_plan_json(txn_id)
    data["branches"][0].update(seat)
    return Plan.model_validate(data)

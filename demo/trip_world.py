"""The trip, in memory: four participants (airline seat hold, hotel room hold, calendar event, card payment), a
scripted finance approver, keys and a coordinator. Used by the in-process demo, the coordinator tests and
bench/txn.py. The operations keep a list of the effects they performed so tests can assert "never twice".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import anyio

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.example_plan import AIRLINE, CALENDAR, HOTEL, PAYMENTS, trip_plan
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.participant.branch import Lease
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.core.txn.machine import Config, Validator
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime, default_validator
from hatp_mcp.runtime.coordinator.scripted_approver import SCRIPTED_GATEWAY, HumanScript, ScriptedApprover
from hatp_mcp.runtime.interfaces import Participant
from hatp_mcp.runtime.participant.driver import DryRun, Operation, ParticipantRuntime
from hatp_mcp.store.participant_state import MemoryParticipantStore, ParticipantStore
from hatp_mcp.store.txn_log import MemoryTxnLog, TxnLog

__all__ = [
    "AIRLINE",
    "CALENDAR",
    "HOTEL",
    "PARTIES",
    "PAYMENTS",
    "CalendarEvent",
    "CardCapture",
    "InventoryHold",
    "World",
    "build_world",
    "trip_plan",
]

# The participant each named key speaks for (bound in the coordinator's keyring, HATP-SIG-6).
PARTIES = {
    "airline": AIRLINE,
    "hotel": HOTEL,
    "calendar": CALENDAR,
    "payments": PAYMENTS,
    "gateway": SCRIPTED_GATEWAY,
}


class InventoryHold(Operation):
    """A seat or a room: one unit; a hold reserves it until released or booked."""

    def __init__(self, name: str, price: Amount, *, sold_out: bool = False) -> None:
        self.name = name
        self.price = price
        self.sold_out = sold_out
        self.version = 1
        self.effects: list[str] = []

    async def dry_run(self, branch: Branch, now: datetime) -> DryRun:
        if self.sold_out:
            return DryRun(refuse_code="SOLD_OUT", refuse_reason=f"no {self.name} left")
        return DryRun(versions={f"{self.name}:inventory": str(self.version)}, cost=self.price, credential_scope="book")

    async def place_hold(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        self.effects.append(f"hold {txn_id}")

    async def release_hold(self, txn_id: str, branch: Branch) -> None:
        self.effects.append(f"release {txn_id}")

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        self.effects.append(f"book {txn_id}")
        return None


class CalendarEvent(Operation):
    def __init__(self) -> None:
        self.effects: list[str] = []

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        self.effects.append(f"create {txn_id}")
        return f"evt-{txn_id}"

    async def undo(self, txn_id: str, branch: Branch, undo_token: str | None, now: datetime, *, key: str) -> None:
        self.effects.append(f"delete {undo_token}")


class CardCapture(Operation):
    """The payment. `hang` makes the next commits hang (in doubt); `decline` refuses them."""

    def __init__(self, price: Amount) -> None:
        self.price = price
        self.effects: list[str] = []
        self.hang = 0
        self.decline = False
        self.version = 1
        self.pending_until: datetime | None = None  # e.g. 3-D Secure: the card holder has not answered yet
        self.promised_by: datetime | None = None  # the decideBy it signs meanwhile (default: pending_until)

    async def dry_run(self, branch: Branch, now: datetime) -> DryRun:
        pending = self.pending_until is not None and now < self.pending_until
        return DryRun(
            versions={"card:tok_visa_4242": str(self.version)},
            cost=self.price,
            credential_scope="capture",
            pending_until=(self.promised_by or self.pending_until) if pending else None,
        )

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        if self.hang > 0:
            self.hang -= 1
            await anyio.sleep_forever()
        if self.decline:
            raise HatpError("HATP-PART-6", "the issuer declined the capture", code="CARD_DECLINED")
        self.effects.append(f"capture {txn_id}")
        return None


@dataclass
class World:
    clock: Clock
    keys: dict[str, SigningKey]
    keyring: Keyring
    seat: InventoryHold
    room: InventoryHold
    event: CalendarEvent
    pay: CardCapture
    participants: dict[str, ParticipantRuntime]
    approver: ScriptedApprover
    log: TxnLog
    escalations: list[tuple[str, str, str]] = field(default_factory=list)

    def coordinator(
        self, config: Config | None = None, validator: Validator | None = None, *, keep_trace: bool = True
    ) -> CoordinatorRuntime:
        async def escalate(txn_id: str, to: str, reason: str) -> None:
            self.escalations.append((txn_id, to, reason))

        routes: dict[str, Participant] = dict(self.participants)
        return CoordinatorRuntime(
            key=self.keys["coordinator"],
            keyring=self.keyring,
            participants=routes,
            approver=self.approver,
            log=self.log,
            clock=self.clock,
            config=config or Config(coordinator="coordinator://acme.com/c1"),
            validator=validator if validator is not None else default_validator(),
            on_escalate=escalate,
            keep_trace=keep_trace,
        )

    def effects(self) -> dict[str, list[str]]:
        return {
            "seat": self.seat.effects,
            "room": self.room.effects,
            "event": self.event.effects,
            "pay": self.pay.effects,
        }


def build_world(
    clock: Clock,
    *,
    log: TxnLog | None = None,
    stores: Callable[[str], ParticipantStore] | None = None,
    scripts: dict[str, HumanScript] | None = None,
    keys: dict[str, SigningKey] | None = None,
    max_lease_seconds: int = 900,
    max_horizon_seconds: int = 24 * 3600,
) -> World:
    keys = keys or {
        "coordinator": SigningKey.generate(["coordinator"], kid="coord-1"),
        "gateway": SigningKey.generate(["gateway"], kid="gw-1"),
        **{n: SigningKey.generate(["participant"], kid=f"{n}-1") for n in ("airline", "hotel", "calendar", "payments")},
    }
    ring = Keyring()
    for name, k in keys.items():
        ring.add_signer(k, PARTIES.get(name))  # HATP-SIG-6: a participant's key speaks only for its participant
    usd = "USD"
    seat = InventoryHold("seat", Amount.of("600.00", usd))
    room = InventoryHold("room", Amount.of("400.00", usd))
    event = CalendarEvent()
    pay = CardCapture(Amount.of("1000.00", usd))
    make_store = stores or (lambda _name: MemoryParticipantStore())
    participants = {}
    for uri, name, op_name, op in (
        (AIRLINE, "airline", "seat.hold", seat),
        (HOTEL, "hotel", "room.hold", room),
        (CALENDAR, "calendar", "event.create", event),
        (PAYMENTS, "payments", "card.capture", pay),
    ):
        participants[uri] = ParticipantRuntime(
            uri,
            keys[name],
            {op_name: op},
            make_store(name),
            clock,
            max_lease_seconds=max_lease_seconds,
            max_horizon_seconds=max_horizon_seconds,
        )
    approver = ScriptedApprover(keys["gateway"], clock, scripts=dict(scripts or {}))
    return World(clock, keys, ring, seat, room, event, pay, participants, approver, log or MemoryTxnLog())

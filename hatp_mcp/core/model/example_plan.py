"""The example plan: Dana's trip to Berlin in the acme.com test organisation, its times made from `now`. Pure.

Four branches on the demo's tool servers (airline seat hold, hotel room hold, calendar event to compensate, the
card capture as the one final step) and a finance approval. Every time in it (createdAt, deadlines, the mandate's
expiry, the approval's decideBy, the travel dates) is relative to the `now` it is given, so a plan made now is
valid now: a plan written out once goes stale within a day (HATP-VAL-9). `hatp example-plan` prints one; the
coordinator serves one made at read time (hatp_mcp.mcp.agent_guide); the in-process demo and tests build on it.
`org_trip_plan` is the same trip in another organisation, for a coordinator signing as that organisation's agent and
for `hatp example-plan --org`: that organisation's people, and inventory of its own each time.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.plan import Plan

__all__ = [
    "AIRLINE",
    "CALENDAR",
    "HOTEL",
    "HOTELS",
    "PAYMENTS",
    "example_txn_id",
    "fresh_inventory",
    "org_trip_plan",
    "trip_plan",
]

AIRLINE = "mcp://airline.example/hatp"
HOTEL = "mcp://hotel.example/hatp"
CALENDAR = "mcp://calendar.example/hatp"
PAYMENTS = "mcp://payments.example/hatp"


def example_txn_id(now: datetime) -> str:
    """A txnId of its own for each second: beginning another fresh example never reuses one (HATP-MCP-21)."""
    return f"txn-trip-{now:%Y%m%dT%H%M%SZ}"


def trip_plan(now: datetime, txn_id: str = "txn-trip-0001", **overrides: Any) -> Plan:
    """The trip plan, its times relative to `now` (an aware datetime). `overrides` replace top-level plan members
    (wire names). Raises ValueError for a naive `now`, pydantic.ValidationError for overrides that are no plan."""

    def at(seconds: int) -> str:
        return format_ts(now + timedelta(seconds=seconds))

    travel = (now + timedelta(days=14)).date().isoformat()  # the flight and check-in, two weeks out
    usd = "USD"
    plan: dict[str, Any] = {
        "hatp": "1",
        "txnId": txn_id,
        "createdAt": at(0),
        "requester": {"principal": "human://acme.com/dana", "agent": "agent://acme.com/travel-bot"},
        "summary": "Book Dana's trip to Berlin for the Q4 offsite (agent-written)",
        "mode": "auto",
        "deadlines": {"decideBy": at(7200), "commitBy": at(9000)},
        "mandate": {"maxSpend": [{"value": "2000.00", "currency": usd}], "expiresAt": at(86400)},
        "approvals": [
            {
                "id": "finance",
                "address": "human://acme.com/role/finance-approver",
                "action": "travel.spend",
                "maxAmount": {"value": "1020.00", "currency": usd},
                "decideBy": at(3600),
                "chain": [
                    {"address": "human://acme.com/alice", "decideSeconds": 3600},
                    {"address": "human://acme.com/frank", "decideSeconds": 7200},
                ],
            }
        ],
        "escalation": {"leadSeconds": 900, "to": "human://acme.com/role/ops-oncall"},
        "recovery": {"offSessionReauth": {"consented": False}},
        "branches": [
            {
                "branchId": "seat",
                "participant": AIRLINE,
                "operation": "seat.hold",
                "tier": "hold",
                "args": {"flight": "LH123", "date": travel, "seat": "14C", "passenger": "Dana Smith"},
                "amount": {"value": "600.00", "currency": usd},
                "leaseSeconds": 900,
                "holdHorizonSeconds": 14400,
                "maxDurationSeconds": 5,
            },
            {
                "branchId": "room",
                "participant": HOTEL,
                "operation": "room.hold",
                "tier": "hold",
                "args": {"hotel": "Adlon", "checkIn": travel, "nights": 2, "guest": "Dana Smith"},
                "amount": {"value": "400.00", "currency": usd},
                "leaseSeconds": 900,
                "holdHorizonSeconds": 14400,
                "maxDurationSeconds": 5,
            },
            {
                "branchId": "event",
                "participant": CALENDAR,
                "operation": "event.create",
                "tier": "compensate",
                "args": {"calendar": "dana", "title": "Berlin offsite", "start": f"{travel}T09:00:00Z"},
                "maxDurationSeconds": 5,
                "undoWindowSeconds": 86400,
                "compensation": {"operation": "event.delete", "args": {"calendar": "dana"}},
            },
            {
                "branchId": "pay",
                "participant": PAYMENTS,
                "operation": "card.capture",
                "tier": "final",
                "args": {"card": "tok_visa_4242", "payee": "acme-travel"},
                "amount": {"value": "1000.00", "currency": usd},
                "tolerancePercent": "2",
                "maxDurationSeconds": 10,
                "settles": ["seat", "room"],
            },
        ],
    }
    plan.update(overrides)
    return Plan.model_validate(plan)


# The hotels the example books; with the travel day and the seat they make each example's inventory its own.
HOTELS = ("Adlon", "Hotel de Rome", "Regent", "Orania", "Sofitel Gendarmenmarkt", "Louisa's Place", "Amano", "Titanic")


def fresh_inventory(txn_id: str, now: datetime) -> dict[str, str]:
    """What the example books, drawn from its txnId (one per second, example_txn_id), so another example in the
    same organisation asks for other inventory (the demo servers key a seat by flight, date and seat, a room by
    hotel and check-in, an event by calendar and start): a travel day 2 to 54 weeks out, a seat, a hotel, a start
    time."""
    h = hashlib.sha256(txn_id.encode()).digest()
    travel = (now + timedelta(days=14 + int.from_bytes(h[:4]) % 365)).date().isoformat()
    return {
        "date": travel,
        "seat": f"{1 + h[4] % 50}{'ABCDEF'[h[5] % 6]}",
        "hotel": HOTELS[h[6] % len(HOTELS)],
        "start": f"{travel}T{8 + h[7] % 10:02d}:{15 * (h[8] % 4):02d}:00Z",
    }


def org_trip_plan(now: datetime, txn_id: str, principal: str, agent: str, traveller: str | None = None) -> Plan:
    """The trip in `principal`'s organisation: asked by `principal` (human://ORG/NAME) through `agent`, approved by
    that organisation's `finance-approver` role (no named chain, no escalation: those name acme.com's people), for
    `traveller` (the principal's display name; default their NAME) on their own calendar, its inventory its own
    (fresh_inventory), so the example can be begun again and again. Raises like trip_plan, and ValueError for a
    principal that is no human://ORG/NAME."""
    org, sep, name = principal.removeprefix("human://").partition("/")
    if not principal.startswith("human://") or not sep or not org or not name:
        raise ValueError(f"{principal!r} is not a human://ORG/NAME")
    who = traveller or name
    fresh = fresh_inventory(txn_id, now)
    wire = trip_plan(now, txn_id).wire()
    approval = {k: v for k, v in wire["approvals"][0].items() if k != "chain"}
    wire["approvals"] = [approval | {"address": f"human://{org}/role/finance-approver"}]
    wire["requester"] = {"principal": principal, "agent": agent}
    wire["summary"] = f"Book {who}'s trip to Berlin for the Q4 offsite (agent-written)"
    del wire["escalation"]
    seat, room, event, _pay = wire["branches"]
    seat["args"] |= {"date": fresh["date"], "seat": fresh["seat"], "passenger": who}
    room["args"] |= {"hotel": fresh["hotel"], "checkIn": fresh["date"], "guest": who}
    event["args"] |= {"calendar": name, "start": fresh["start"]}
    event["compensation"]["args"] = {"calendar": name}
    return Plan.model_validate(wire)

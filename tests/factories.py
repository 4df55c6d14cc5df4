"""Test data builders: a realistic trip plan and signing keys. Plain data, no IO."""

from __future__ import annotations

from typing import Any


def trip_plan(txn_id: str = "txn-trip-0001") -> dict[str, Any]:
    """A 2-3 KB trip: seat and room holds, a calendar event, a card capture, a finance approval."""
    usd = "USD"
    return {
        "hatp": "1",
        "txnId": txn_id,
        "createdAt": "2026-11-29T10:00:00Z",
        "requester": {"principal": "human://acme.com/dana", "agent": "agent://acme.com/travel-bot"},
        "summary": "Book Dana's trip to Berlin for the Q4 offsite (agent-written)",
        "mode": "auto",
        "deadlines": {"decideBy": "2026-11-29T12:00:00Z", "commitBy": "2026-11-29T12:30:00Z"},
        "mandate": {"maxSpend": [{"value": "2000.00", "currency": usd}], "expiresAt": "2026-12-01T00:00:00Z"},
        "approvals": [
            {
                "id": "finance",
                "address": "human://acme.com/role/finance-approver?quorum=1-of-3",
                "action": "travel.spend",
                "maxAmount": {"value": "1020.00", "currency": usd},
                "decideBy": "2026-11-29T11:00:00Z",
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
                "participant": "mcp://airline.example/hatp",
                "operation": "seat.hold",
                "tier": "hold",
                "args": {"flight": "LH123", "date": "2026-12-10", "seat": "14C", "passenger": "Dana Smith"},
                "amount": {"value": "600.00", "currency": usd},
                "leaseSeconds": 900,
                "holdHorizonSeconds": 14400,
                "maxDurationSeconds": 5,
            },
            {
                "branchId": "room",
                "participant": "mcp://hotel.example/hatp",
                "operation": "room.hold",
                "tier": "hold",
                "args": {"hotel": "Adlon", "checkIn": "2026-12-10", "nights": 2, "guest": "Dana Smith"},
                "amount": {"value": "400.00", "currency": usd},
                "leaseSeconds": 900,
                "holdHorizonSeconds": 14400,
                "maxDurationSeconds": 5,
            },
            {
                "branchId": "event",
                "participant": "mcp://calendar.example/hatp",
                "operation": "event.create",
                "tier": "compensate",
                "args": {"calendar": "dana", "title": "Berlin offsite", "start": "2026-12-10T09:00:00Z"},
                "maxDurationSeconds": 5,
                "undoWindowSeconds": 86400,
                "compensation": {"operation": "event.delete", "args": {"calendar": "dana"}},
            },
            {
                "branchId": "pay",
                "participant": "mcp://payments.example/hatp",
                "operation": "card.capture",
                "tier": "final",
                "args": {"card": "tok_visa_4242", "payee": "acme-travel", "memo": "Berlin offsite"},
                "amount": {"value": "1000.00", "currency": usd},
                "tolerancePercent": "2",
                "maxDurationSeconds": 10,
                "settles": ["seat", "room"],
            },
        ],
    }


def signed_trip_record(txn_id: str = "txn-trip-0001", outcome: str = "COMMITTED") -> tuple[dict[str, Any], Any, Any]:
    """A closed, verifiable record of a committed trip, its keyring, and the keys: (record, ring, keys).

    Built directly with RecordChain and hand-signed evidence, so record tests do not depend on the coordinator.
    """
    from hatp_mcp.core.evidence.keys import Keyring, SigningKey, sign_object
    from hatp_mcp.core.model import Plan
    from hatp_mcp.core.txn.record import RecordChain

    plan = Plan.model_validate(trip_plan(txn_id))
    keys = {
        "coordinator": SigningKey.generate(["coordinator"], kid="coord-1"),
        "participant": SigningKey.generate(["participant"], kid="airline-1"),
        "gateway": SigningKey.generate(["gateway"], kid="gw-1"),
    }
    ring = Keyring()
    parties = {"participant": "mcp://airline.example/hatp", "gateway": "gateway://acme.com"}
    for name, k in keys.items():
        ring.add_signer(k, parties.get(name))  # HATP-SIG-6: verify_record checks the evidence names this party
    chain = RecordChain(plan, keys["coordinator"], "coordinator://acme.com/c1")
    d = chain.plan_digest
    chain.append("txn.begin", "2026-11-29T10:00:00Z", {"mode": "parallel"})
    vote = sign_object(
        {
            "type": "hatp.vote",
            "txnId": txn_id,
            "branchId": "seat",
            "planDigest": d,
            "voter": "mcp://airline.example/hatp",
            "decision": "yes",
            "issuedAt": "2026-11-29T10:00:01Z",
        },
        keys["participant"],
    )
    chain.append("vote", "2026-11-29T10:00:01Z", {"branchId": "seat"}, vote, author="mcp://airline.example/hatp")
    gw_vote = sign_object(
        {
            "type": "hatp.vote",
            "txnId": txn_id,
            "branchId": "finance",
            "planDigest": d,
            "voter": "gateway://acme.com",
            "decision": "yes",
            "issuedAt": "2026-11-29T10:05:00Z",
        },
        keys["gateway"],
    )
    chain.append("vote", "2026-11-29T10:05:00Z", {"branchId": "finance"}, gw_vote, author="gateway://acme.com")
    chain.append("decision", "2026-11-29T10:05:01Z", {"decision": "commit"})
    receipt = sign_object(
        {
            "type": "hatp.receipt",
            "txnId": txn_id,
            "branchId": "seat",
            "planDigest": d,
            "participant": "mcp://airline.example/hatp",
            "phase": "commit",
            "outcome": "ok",
            "issuedAt": "2026-11-29T10:05:02Z",
        },
        keys["participant"],
    )
    chain.append("commit", "2026-11-29T10:05:02Z", {"branchId": "seat"}, receipt, author="mcp://airline.example/hatp")
    chain.close("2026-11-29T10:05:03Z", outcome)
    return chain.record(), ring, keys

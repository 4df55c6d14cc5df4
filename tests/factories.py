"""Test data builders: a realistic trip plan and signing keys. Plain data, no IO."""

from __future__ import annotations

from typing import Any


def trip_plan_json(txn_id: str = "txn-trip-0001") -> dict[str, Any]:
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


PARTIES = {
    "participant": "mcp://airline.example/hatp",
    "hotel": "mcp://hotel.example/hatp",
    "calendar": "mcp://calendar.example/hatp",
    "payments": "mcp://payments.example/hatp",
    "gateway": "gateway://acme.com",
}
_KEY_OF = {"seat": "participant", "room": "hotel", "event": "calendar", "pay": "payments"}


def signed_trip_record(txn_id: str = "txn-trip-0001", outcome: str = "COMMITTED") -> tuple[dict[str, Any], Any, Any]:
    """A closed, verifiable record of a committed trip, its keyring, and the keys: (record, ring, keys).

    Built directly with RecordChain and hand-signed evidence, so record tests do not depend on the coordinator.
    Its events: 0 txn.begin; 1-8 each branch's vote and prepare receipt (seat, room, event, pay); 9 the gateway's
    vote and 10 its approval of `finance`; 11 the commit decision; 12-15 the commit receipts (event, pay, seat,
    room); 16 record.closed. `keys["participant"]` is the airline's key.
    """
    from hatp_mcp.core.model.plan import Plan
    from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
    from hatp_mcp.core.txn.record import RecordChain

    plan = Plan.model_validate(trip_plan_json(txn_id))
    keys = {
        "coordinator": SigningKey.generate(["coordinator"], kid="coord-1"),
        "participant": SigningKey.generate(["participant"], kid="airline-1"),
        "hotel": SigningKey.generate(["participant"], kid="hotel-1"),
        "calendar": SigningKey.generate(["participant"], kid="calendar-1"),
        "payments": SigningKey.generate(["participant"], kid="payments-1"),
        "gateway": SigningKey.generate(["gateway"], kid="gw-1"),
    }
    ring = Keyring()
    for name, k in keys.items():
        ring.add_signer(k, PARTIES.get(name))  # HATP-SIG-6: verify_record checks the evidence names this party
    chain = RecordChain(plan, keys["coordinator"], "coordinator://acme.com/c1")
    d = chain.plan_digest
    chain.append("txn.begin", "2026-11-29T10:00:00Z", {"mode": "parallel"})

    def signed(kind: str, branch_id: str, who: str, at: str, **more: Any) -> dict[str, Any]:
        party = "voter" if kind == "hatp.vote" else "participant"
        body = {"type": kind, "txnId": txn_id, "branchId": branch_id, "planDigest": d, party: PARTIES[who]}
        return sign_object({**body, **more, "issuedAt": at}, keys[who])

    at = "2026-11-29T10:00:01Z"
    for b in plan.branches:
        who = _KEY_OF[b.branch_id]
        vote = signed("hatp.vote", b.branch_id, who, at, decision="yes")
        receipt = signed("hatp.receipt", b.branch_id, who, at, phase="prepare", outcome="ok")
        chain.append("vote", at, {"branchId": b.branch_id}, vote, author=PARTIES[who])
        chain.append("receipt", at, {"branchId": b.branch_id}, receipt, author=PARTIES[who])
    gw_vote = signed("hatp.vote", "finance", "gateway", "2026-11-29T10:05:00Z", decision="yes")
    chain.append("vote", "2026-11-29T10:05:00Z", {"branchId": "finance"}, gw_vote, author=PARTIES["gateway"])
    chain.append(
        "approval",
        "2026-11-29T10:05:00Z",
        {"requirementId": "finance"},
        trip_approval(plan, d, keys["gateway"]),
        author=PARTIES["gateway"],
    )
    chain.append("decision", "2026-11-29T10:05:01Z", {"decision": "commit"})
    for bid in ("event", "pay", "seat", "room"):
        who = _KEY_OF[bid]
        receipt = signed("hatp.receipt", bid, who, "2026-11-29T10:05:02Z", phase="commit", outcome="ok")
        chain.append("commit", "2026-11-29T10:05:02Z", {"branchId": bid}, receipt, author=PARTIES[who])
    chain.close("2026-11-29T10:05:03Z", outcome)
    return chain.record(), ring, keys


def trip_approval(plan: Any, plan_digest: str, key: Any, approver: str = "human://acme.com/alice") -> dict[str, Any]:
    """The gateway's signed approval of the trip's `finance` requirement by one approver (no human proof)."""
    from hatp_mcp.core.model.money import plan_money
    from hatp_mcp.core.signing.keys import sign_object

    req = plan.approvals[0]
    totals, up_to = plan_money(plan).amounts()
    approval = {
        "type": "hatp.approval",
        "approvalId": "apr-0001",
        "subject": "plan",
        "txnId": plan.txn_id,
        "requirementId": req.id,
        "planDigest": plan_digest,
        "decision": "approve",
        "decisions": [{"approver": approver, "decision": "approve", "decidedAt": "2026-11-29T10:05:00Z"}],
        "quorum": {"required": 1, "of": 3},
        "routing": {
            "address": req.address,
            "planDigest": plan_digest,
            "requester": plan.requester.principal,
            "planTotals": [a.wire() for a in totals],
            "upTo": [a.wire() for a in up_to],
            "checked": {"status": "checked", "action": req.action, "amounts": [a.wire() for a in up_to]},
            "humans": [{"human": approver, "status": "decided"}],
        },
        "gateway": PARTIES["gateway"],
        "nonce": "n" * 32,
        "issuedAt": "2026-11-29T10:05:00Z",
    }
    signed: dict[str, Any] = sign_object(approval, key)
    return signed

"""The example organisation acme.com from spec/fixtures/org/: its Directory, test-only keys and plans. Test data."""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any

from hatp_mcp.core.gateway.agents import AgentKeys, sign_request
from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.gateway.proof import HumanKeys, apply_proof, sign_decision, subject_digest
from hatp_mcp.core.model.gateway import Ask
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object

ORG_DIR = Path(__file__).resolve().parents[1] / "spec" / "fixtures" / "org"
GATEWAY_ID = "https://acme.com/hatp/gateway"
ACTION = "travel.spend"
NAMES = ["alice", "erin", "dana", "bob", "carol", "frank"]
AGENT = "agent://acme.com/travel-bot"  # acts for dana (spec/fixtures/org/agents/travel-bot.json)


def h(name: str) -> str:
    return f"human://acme.com/{name}"


def well_known() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ORG_DIR / ".well-known" / "human-card.json").read_text())
    return doc


def card_doc(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ORG_DIR / "cards" / f"{name}.json").read_text())
    return doc


def card_docs() -> list[dict[str, Any]]:
    return [card_doc(n) for n in NAMES]


def contacts() -> dict[str, dict[str, str]]:
    doc: dict[str, dict[str, str]] = json.loads((ORG_DIR / "contacts.json").read_text())
    return doc


def directory_key() -> SigningKey:
    return SigningKey.from_jwk(json.loads((ORG_DIR / "test-only-keys" / "directory.private.jwk.json").read_text()))


def gateway_key() -> SigningKey:
    return SigningKey.from_jwk(json.loads((ORG_DIR / "test-only-keys" / "gateway.private.jwk.json").read_text()))


def human_key(name: str) -> SigningKey:
    """A person's TEST-ONLY decision key (the ed25519 entry of their card)."""
    path = ORG_DIR / "test-only-keys" / "humans" / f"{name}.private.jwk.json"
    return SigningKey.from_jwk(json.loads(path.read_text()))


def human_keys() -> HumanKeys:
    return HumanKeys.from_cards(directory().cards())


def proof(ask: Ask, name: str, decision: str, now: datetime, value: Any = None, **over: Any) -> dict[str, Any]:
    """`name`'s signed decision on `ask` (wire form); `over` changes the askId, subject or human signed."""
    signed = sign_decision(
        over.get("key", human_key(name)),
        over.get("ask_id", ask.ask_id),
        over.get("subject", subject_digest(ask)),
        over.get("human", h(name)),
        decision,
        now,
        nonce=over.get("nonce", secrets.token_urlsafe(18)),
        value=value,
        reason=over.get("reason"),
    )
    return signed.wire()


def signed_for(
    store: Any, ask_id: str, name: str, decision: str, now: datetime, value: Any = None, **over: Any
) -> dict[str, Any]:
    """`name`'s signed decision on the ask `ask_id` as a GatewayStore holds it (`over` as for `proof`)."""
    stored = store.get(ask_id)
    assert stored is not None and stored.record is not None, ask_id
    return proof(stored.record.ask, name, decision, now, value, **over)


async def decide_as(gw: Any, ask_id: str, name: str, decision: str, value: Any = None, **over: Any) -> Any:
    """`name` decides on a GatewayApprover `gw` with a proof signed by their test-only key, dated gw's now (`over`
    as for `proof`, e.g. `reason`)."""
    return await gw.decide(ask_id, signed_for(gw.store, ask_id, name, decision, gw.clock.now(), value, **over))


def approve_as(rec: Any, name: str, now: datetime, decision: str = "approve") -> Any:
    """An AskRecord after `name`'s proven decision (core.human_proof.apply_proof), as the gateway records it."""
    after, _ = apply_proof(rec, proof(rec.ask, name, decision, now), humans=human_keys(), now=now, nonce_used=False)
    return after


def agent_doc(name: str = "travel-bot") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ORG_DIR / "agents" / f"{name}.json").read_text())
    return doc


def agent_key(name: str = "travel-bot") -> SigningKey:
    """An agent's TEST-ONLY request-signing key (the ed25519 entry of its agent card)."""
    path = ORG_DIR / "test-only-keys" / "agents" / f"{name}.private.jwk.json"
    return SigningKey.from_jwk(json.loads(path.read_text()))


def agent_keys(extra: list[dict[str, Any]] | None = None) -> AgentKeys:
    agents, ignored = AgentKeys.load(well_known(), [agent_doc(), *(extra or [])])
    assert not ignored, ignored
    return agents


def agent_request(digest: str, now: datetime, subject: str = "tool-call", **over: Any) -> dict[str, Any]:
    """The travel-bot's signed request about `digest` (wire form); `over` changes the agent, actsFor or key."""
    return sign_request(
        over.get("key", agent_key()),
        over.get("agent", AGENT),
        over.get("acts_for", h("dana")),
        subject,
        digest,
        now,
        nonce=over.get("nonce", secrets.token_urlsafe(18)),
    ).wire()


def keyring() -> Keyring:
    return Keyring.from_jwks({"keys": well_known()["keys"]})


def resigned(name: str, **changes: Any) -> dict[str, Any]:
    """A fixture card changed and signed again by the Directory (a legitimate new card)."""
    body = {k: v for k, v in card_doc(name).items() if k != "signature"}
    body.update(changes)
    return sign_object(body, directory_key())


def directory(extra: list[dict[str, Any]] | None = None, only: list[str] | None = None) -> Directory:
    docs = [card_doc(n) for n in (only or NAMES)] + list(extra or [])
    d, ignored = Directory.load(well_known(), docs)
    assert not ignored, ignored
    return d


def plan(
    amounts: list[str] | None = None,
    *,
    address: str = "human://acme.com/role/finance-approver?quorum=2-of-3",
    max_amount: str | None = None,
    tolerance: str | None = None,
    requester: str = "dana",
    decide_by: str = "2026-11-29T14:00:00Z",
    txn_id: str = "txn-acme-0001",
    summary: str | None = "Pay the offsite venue (agent-written)",
) -> Plan:
    """A plan with one payment branch per amount (USD), needing one finance approval."""
    branches = []
    for i, value in enumerate(amounts or ["25000"]):
        b: dict[str, Any] = {
            "branchId": f"pay{i}",
            "participant": "mcp://payments.example/hatp",
            "operation": "card.capture",
            "tier": "final",
            "args": {"memo": f"venue deposit {i}"},
            "amount": {"value": value, "currency": "USD"},
        }
        if tolerance is not None:
            b["tolerancePercent"] = tolerance
        branches.append(b)
    req: dict[str, Any] = {"id": "finance", "address": address, "action": ACTION}
    if max_amount is not None:
        req["maxAmount"] = {"value": max_amount, "currency": "USD"}
    doc: dict[str, Any] = {
        "hatp": "1",
        "txnId": txn_id,
        "createdAt": "2026-11-29T10:00:00Z",
        "requester": {"principal": h(requester), "agent": "agent://acme.com/travel-bot"},
        "deadlines": {"decideBy": decide_by},
        "approvals": [req],
        "branches": branches,
    }
    if summary is not None:
        doc["summary"] = summary
    return Plan.model_validate(doc)

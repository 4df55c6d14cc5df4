"""A COMMITTED Transaction Record of the one-payment acme plan whose approval came from the served gateway: bob
approved with his passkey, carol with her Ed25519 key; the coordinator and the payments server sign with keys made
here, and the keyring checks it all (as `hatp verify --keys` would). Test code only."""

from __future__ import annotations

from typing import Any

from hatp_mcp.core.gateway.proof import subject_digest
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.record import RecordChain
from tests.acme_org import GATEWAY_ID, decide_as, keyring
from tests.web.inbox_fixture import Served

__all__ = ["committed_record"]

PAYMENTS = "mcp://payments.example/hatp"


async def committed_record(served: Served, p: Plan) -> tuple[dict[str, Any], Keyring]:
    """Ask `p`'s finance approval on the served gateway, have bob (passkey) and carol (Ed25519) approve, and chain
    the closed record around the gateway's signed vote and approval. Returns (record, keyring)."""
    ask_id = f"{p.txn_id}/finance"
    await served.gateway.ask(p, "finance")
    stored = served.gateway.store.get(ask_id)
    assert stored is not None and stored.record is not None
    assertion = served.bob.decide(
        ask_id,
        subject_digest(stored.record.ask),
        "approve",
        format_ts(served.gateway.clock.now()),
        origin=served.origin,
    )
    await served.gateway.decide_passkey(ask_id, assertion, served.inbox.rp, 0, via="inbox-passkey")
    await decide_as(served.gateway, ask_id, "carol", "approve")
    answer = await served.gateway.poll(p.txn_id, "finance")
    assert answer.approval is not None
    coordinator = SigningKey.generate(["coordinator"], kid="coord")
    payments = SigningKey.generate(["participant"], kid="payments-1")
    ring = Keyring(e.with_party(GATEWAY_ID) if "gateway" in e.roles else e for e in keyring().entries())
    ring.add_signer(coordinator)
    ring.add_signer(payments, PAYMENTS)
    chain = RecordChain(p, coordinator, "coordinator://acme.com/c1")
    at = format_ts(served.gateway.clock.now())
    d = chain.plan_digest

    def signed(kind: str, phase: str | None = None) -> dict[str, Any]:
        party = {"voter" if kind == "hatp.vote" else "participant": PAYMENTS}
        more = {"decision": "yes"} if phase is None else {"phase": phase, "outcome": "ok"}
        body = {"type": kind, "txnId": p.txn_id, "branchId": "pay0", "planDigest": d, **party, **more}
        return sign_object({**body, "issuedAt": at}, payments)

    chain.append("txn.begin", at)
    chain.append("vote", at, {"branchId": "pay0"}, signed("hatp.vote"), author=PAYMENTS)
    chain.append("receipt", at, {"branchId": "pay0"}, signed("hatp.receipt", "prepare"))
    chain.append("vote", at, {"branchId": "finance"}, answer.vote, author=GATEWAY_ID)
    chain.append("approval", at, {"requirementId": "finance"}, answer.approval, author=GATEWAY_ID)
    chain.append("decision", at, {"decision": "commit"})
    chain.append("commit", at, {"branchId": "pay0"}, signed("hatp.receipt", "commit"))
    chain.close(at, "COMMITTED")
    return chain.record(), ring

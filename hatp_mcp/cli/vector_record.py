"""The interop vectors of a whole signed Transaction Record (spec/vectors/record.json) and of approvals
(spec/vectors/approvals.json), built from fixed keys (hatp_mcp/cli/vector_keys.py) and fixed timestamps, so the
output is the same on every run (Ed25519 signatures are deterministic).

The record is the vector plan (spec/fixtures/hatp/trip.valid.json) committed: the gateway's approval of `finance`
with alice's own signed proof, every branch's signed vote and prepare receipt, the commit decision, every commit
receipt, the close; each participant answer names the record head it answered at (spec/hatp.md HATP-REC-19). Next
to it: the digest of every event (the chain, step by step), what `hatp verify` must say about it, each
participant's own export of its answers, and the planted violation of HATP-REC-21 (the record cut back to an
abort and signed again with the coordinator's key) with the refusals it must draw. The module builds data only;
vectors_cmd writes and checks the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hatp_mcp.cli.vector_keys import KEYS, key, keyring
from hatp_mcp.core.gated_tools.checks import GateRequirement, expected_call
from hatp_mcp.core.gated_tools.gateway_routing import tool_call_ask_id
from hatp_mcp.core.gateway.ask_ids import approval_ask_id
from hatp_mcp.core.gateway.proof import ask_id_of
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.money import plan_money
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import canonical, digest
from hatp_mcp.core.signing.keys import sign_object, signing_bytes
from hatp_mcp.core.txn.record import RecordChain, check_record
from hatp_mcp.errors import BrokenInvariant

__all__ = ["approval_vectors", "record_vectors"]

_PARTICIPANT_KEY = {
    "https://airline.example/mcp": "airline",
    "https://hotel.example/mcp": "hotel",
    "https://calendar.example/mcp": "calendar",
    "https://payments.example/mcp": "payments",
}
_COORDINATOR = KEYS["coordinator"][1]
_GATEWAY = KEYS["gateway"][1]
_ALICE = KEYS["alice"][1]
_RECORD_KEYS = ("coordinator", "airline", "hotel", "calendar", "payments", "gateway")


def _at(minute: int, second: int) -> str:
    return f"2026-11-29T10:{minute:02d}:{second:02d}Z"


def _proof(ask_id: str, subject: str, at: str, nonce: str) -> dict[str, Any]:
    """Alice's own signed decision (spec/gateway.md HATP-GW-26), as `sign_decision` makes it."""
    body = {
        "type": "hatp.human-decision",
        "askId": ask_id,
        "subjectDigest": subject,
        "human": _ALICE,
        "decision": "approve",
        "issuedAt": at,
        "nonce": nonce,
    }
    signed: dict[str, Any] = sign_object(body, key("alice"))
    return signed


def _plan_approval(plan: Plan, plan_digest: str) -> dict[str, Any]:
    """The gateway's signed Approval of the plan's `finance` requirement, alice deciding with her proof."""
    req = plan.approvals[0]
    totals, up_to = plan_money(plan).amounts()
    at = _at(5, 0)
    ask_id = approval_ask_id(plan.txn_id, req.id)
    approval: dict[str, Any] = {
        "type": "hatp.approval",
        "approvalId": "apr-vector-0001",
        "subject": "plan",
        "txnId": plan.txn_id,
        "requirementId": req.id,
        "planDigest": plan_digest,
        "decision": "approve",
        "decisions": [
            {
                "approver": _ALICE,
                "decision": "approve",
                "decidedAt": at,
                "via": "inbox",
                "proof": _proof(ask_id, plan_digest, at, "vector-nonce-alice-0001"),
            }
        ],
        "quorum": {"required": 1, "of": 1},
        "routing": {
            "address": req.address,
            "planDigest": plan_digest,
            "requester": plan.requester.principal,
            "planTotals": [a.wire() for a in totals],
            "upTo": [a.wire() for a in up_to],
            "checked": {"status": "checked", "action": req.action, "amounts": [a.wire() for a in up_to]},
            "humans": [{"human": _ALICE, "status": "decided"}],
        },
        "gateway": _GATEWAY,
        "nonce": "vector-nonce-gateway-0001",
        "issuedAt": at,
    }
    if ask_id_of(Approval.model_validate(approval)) != ask_id:  # the ask id the proof binds
        raise BrokenInvariant(f"the vector's approval binds another ask than {ask_id}")
    signed: dict[str, Any] = sign_object(approval, key("gateway"))
    return signed


def _answer(kind: str, plan: Plan, plan_digest: str, branch_id: str, at: str, head: Any, **more: Any) -> dict[str, Any]:
    """A participant's signed vote or receipt naming the record head it answered at (HATP-REC-19)."""
    participant = plan.branch(branch_id).participant
    party = "voter" if kind == "hatp.vote" else "participant"
    body = {
        "type": kind,
        "txnId": plan.txn_id,
        "branchId": branch_id,
        "planDigest": plan_digest,
        party: participant,
        **more,
        "recordHead": head.wire(),
        "issuedAt": at,
    }
    signed: dict[str, Any] = sign_object(body, key(_PARTICIPANT_KEY[participant]))
    return signed


def _committed(plan: Plan) -> tuple[RecordChain, dict[str, list[dict[str, Any]]]]:
    """The committed record, and each participant's own answers (what `hatp evidence` exports)."""
    chain = RecordChain(plan, key("coordinator"), _COORDINATOR)
    d = chain.plan_digest
    kept: dict[str, list[dict[str, Any]]] = {p: [] for p in _PARTICIPANT_KEY}
    chain.append("txn.begin", _at(0, 0), {"mode": "parallel", "requested": plan.mode})
    chain.append("vote", _at(5, 0), {"branchId": "finance"}, _gateway_vote(plan, d), author=_GATEWAY)
    chain.append("approval", _at(5, 0), {"requirementId": "finance"}, _plan_approval(plan, d), author=_GATEWAY)
    sent = chain.head_at  # every prepare is sent at this head
    for n, b in enumerate(plan.branches):
        at = _at(5, 1 + n)
        vote = _answer("hatp.vote", plan, d, b.branch_id, at, sent, decision="yes")
        receipt_body: dict[str, Any] = {"phase": "prepare", "outcome": "ok"}
        if b.amount is not None:
            receipt_body["reportedCost"] = b.amount.wire()
        if b.tier == "hold":
            receipt_body["leaseExpiresAt"] = _at(20, 1 + n)
            receipt_body["holdHorizon"] = "2026-11-29T14:00:00Z"
        receipt = _answer("hatp.receipt", plan, d, b.branch_id, at, sent, **receipt_body)
        chain.append("vote", at, {"branchId": b.branch_id}, vote, author=b.participant)
        chain.append("receipt", at, {"branchId": b.branch_id}, receipt, author=b.participant)
        kept[b.participant] += [vote, receipt]
    decision = chain.append("decision", _at(5, 10), {"decision": "commit", "reason": "every branch voted yes"})
    at_decision = chain.head_at  # a commit answers at the decision it carries out
    if at_decision is None or at_decision.event_digest != digest(decision):
        raise BrokenInvariant("the vector's chain does not end at the decision it just appended")
    for n, b in enumerate(plan.branches):
        at = _at(5, 11 + n)
        more = {"undoToken": "undo-calendar-0001"} if b.tier == "compensate" else {}
        receipt = _answer("hatp.receipt", plan, d, b.branch_id, at, at_decision, phase="commit", outcome="ok", **more)
        chain.append("commit", at, {"branchId": b.branch_id}, receipt, author=b.participant)
        kept[b.participant].append(receipt)
    chain.close(_at(5, 20), "COMMITTED")
    return chain, kept


def _gateway_vote(plan: Plan, plan_digest: str) -> dict[str, Any]:
    body = {
        "type": "hatp.vote",
        "txnId": plan.txn_id,
        "branchId": "finance",
        "planDigest": plan_digest,
        "voter": _GATEWAY,
        "decision": "yes",
        "issuedAt": _at(5, 0),
    }
    signed: dict[str, Any] = sign_object(body, key("gateway"))
    return signed


def _cut_to_an_abort(plan: Plan, record: Mapping[str, Any]) -> dict[str, Any]:
    """HATP-REC-21's planted violation: cut back to txn.begin, an abort appended, decided and closed, re-signed."""
    chain = RecordChain(plan, key("coordinator"), _COORDINATOR)
    begin = record["events"][0]
    chain.append(begin["event"], begin["at"], begin["body"])
    chain.append("abort.requested", _at(0, 1), {"reason": "the agent changed its mind"})
    chain.append("decision", _at(0, 1), {"decision": "abort", "reason": "abort.requested"})
    chain.close(_at(0, 2), "ABORTED")
    return chain.record()


def _verdict(record: Mapping[str, Any], ring: Any, evidence: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    found = check_record(record, ring, evidence=evidence or [])
    anchoring = found.anchoring
    if anchoring is None:
        raise BrokenInvariant("check_record gave no anchoring verdict for the vector's record")
    return {
        "ok": not found.problems,
        "problems": [p.to_dict() for p in found.problems],
        "outcome": found.outcome,
        "anchoring": anchoring.status.value,
        "pinnedTo": anchoring.pinned_to,
    }


def record_vectors(plan: Plan) -> dict[str, Any]:
    """spec/vectors/record.json's document."""
    chain, kept = _committed(plan)
    record = chain.record()
    ring = keyring(*_RECORD_KEYS)
    exports: list[dict[str, Any]] = [
        {"type": "hatp.evidence", "txnId": plan.txn_id, "evidence": answers} for answers in kept.values()
    ]
    outside = [answer for answers in kept.values() for answer in answers]
    forged = _cut_to_an_abort(plan, record)
    verdicts = {
        "record": _verdict(record, ring),
        "recordWithEvidence": _verdict(record, ring, outside),
        "forged": _verdict(forged, ring),
        "forgedWithEvidence": _verdict(forged, ring, outside),
    }
    if not (verdicts["record"]["ok"] and verdicts["recordWithEvidence"]["ok"] and verdicts["forged"]["ok"]):
        raise BrokenInvariant("a record of the vector that must verify does not")
    if verdicts["forgedWithEvidence"]["ok"]:
        raise BrokenInvariant("the vector's forged record verifies with the evidence that must catch it")
    return {
        "about": "A whole signed Transaction Record (spec/hatp.md section 5) under the keys of keys.json: "
        "`keyring` is the verifier's JWKS (each key bound to its party, HATP-SIG-6); `eventDigests[i]` is the "
        "digest of event i (signature included), which event i+1 names as `prev` (HATP-REC-2); each participant "
        "vote and receipt names the head it answered at, `recordHead {seq, digest}` (HATP-REC-19: a commit "
        "receipt's is the commit decision). `exports` are the participants' own answers (`hatp evidence`). "
        "`forged` is the record cut back and closed ABORTED, re-signed with the coordinator's key: it holds "
        "alone (`anchoring: none`) and is refused with the exports (HATP-REC-21). `expected` is what a verifier "
        "must find for each (`problems` as (event index, rule), index -1 the record itself; reasons are "
        "informative).",
        "keyring": ring.to_jwks(),
        "record": record,
        "eventDigests": [digest(e) for e in record["events"]],
        "exports": exports,
        "forged": forged,
        "expected": {
            name: {**v, "problems": [{"index": p["index"], "rule": p["rule"]} for p in v["problems"]]}
            for name, v in verdicts.items()
        },
        "reasons": {name: [p["reason"] for p in v["problems"]] for name, v in verdicts.items() if v["problems"]},
    }


def _signed(name: str, obj: dict[str, Any], tamper: tuple[str, Any], refused: str) -> dict[str, Any]:
    field, value = tamper
    return {
        "name": name,
        "kid": obj["signature"]["kid"],
        "signingBytes": signing_bytes(obj).decode(),
        "signed": obj,
        "tampered": {"change": {field: value}, "object": {**obj, field: value}, "refused": refused},
    }


def approval_vectors(plan: Plan) -> dict[str, Any]:
    """spec/vectors/approvals.json's document: a gated tool call's approval (spec/gated-tools.md) and a plan's."""
    requirement = GateRequirement(
        address="human://acme.com/role/finance-approver",
        action="payments.transfer",
        amount_from="/amount",
        payee_from="/payee",
    )
    arguments = {
        "amount": {"value": "250.00", "currency": "USD"},
        "payee": "acct:acme-supplies",
        "memo": "invoice 2026-117",
    }
    call = expected_call("mcp://payments.example/hatp", "transfer", arguments, requirement, None)
    call_digest = call.digest()
    ask_id = tool_call_ask_id(call_digest)
    at = "2026-11-29T10:06:00Z"
    approval: dict[str, Any] = {
        "type": "hatp.approval",
        "approvalId": ask_id,
        "subject": "tool-call",
        "requirementId": "payments.transfer",
        "planDigest": call_digest,
        "decision": "approve",
        "decisions": [
            {
                "approver": _ALICE,
                "decision": "approve",
                "decidedAt": at,
                "via": "inbox",
                "proof": _proof(ask_id, call_digest, at, "vector-nonce-alice-0002"),
            }
        ],
        "quorum": {"required": 1, "of": 1},
        "routing": {
            "address": requirement.address,
            "planDigest": call_digest,
            "requester": "human://acme.com/dana",
            "planTotals": [arguments["amount"]],
            "upTo": [arguments["amount"]],
            "checked": {"status": "checked", "action": requirement.action, "amounts": [arguments["amount"]]},
            "humans": [{"human": _ALICE, "status": "decided"}],
        },
        "gateway": _GATEWAY,
        "nonce": "vector-nonce-gateway-0002",
        "issuedAt": at,
        "expiresAt": "2026-11-29T10:21:00Z",
        "toolCall": call.wire(),
    }
    Approval.model_validate(approval)  # the schema's own check: a vector is a well-formed Approval
    tool_approval = sign_object(approval, key("gateway"))
    plan_approval = _plan_approval(plan, plan.digest())
    return {
        "about": "Approvals (spec/hatp.md 1.2, spec/gated-tools.md): `toolCall.call` shows how a gated call becomes "
        "its ToolCall (argumentsDigest is the digest of `arguments`; maxAmount and payee are what the "
        "requirement's JSON pointers `amountFrom` and `payeeFrom` find) and the call digest, the digest of the "
        "ToolCall's wire form, which the approval names as `planDigest` and `routing.planDigest` and alice's own "
        "proof as `subjectDigest` (its `askId` is `toolcall.` + the digest's first 24 hex). Each signed object "
        "(the gateway's approval, the person's proof inside it) verifies over `signingBytes` with the key "
        "`kid` of keys.json, and each `tampered.object` must fail (HATP-SIG-4). Checking a whole approval at a "
        "gate also needs the organisation's Directory-signed cards (HATP-GATE-21..25): not part of these "
        "vectors.",
        "toolCall": {
            "server": call.server,
            "tool": call.tool,
            "arguments": arguments,
            "requires": requirement.wire(),
            "argumentsDigest": digest(arguments),
            "call": call.wire(),
            "callCanonical": canonical(call.wire()).decode(),
            "callDigest": call_digest,
            "askId": ask_id,
        },
        "cases": [
            _signed(
                "tool-call-approval",
                tool_approval,
                ("toolCall", {**call.wire(), "payee": "acct:mallory"}),
                "HATP-SIG-4",
            ),
            _signed("tool-call-proof", tool_approval["decisions"][0]["proof"], ("decision", "reject"), "HATP-SIG-4"),
            _signed("plan-approval", plan_approval, ("quorum", {"required": 1, "of": 3}), "HATP-SIG-4"),
            _signed("plan-proof", plan_approval["decisions"][0]["proof"], ("subjectDigest", call_digest), "HATP-SIG-4"),
        ],
        "planDigest": plan.digest(),
    }

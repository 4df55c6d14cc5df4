"""Human decision proofs: a person signs their own decision (`hatp.human-decision`) with the `ed25519` key on
their Directory-signed card, and nothing else makes a decision count (spec/gateway.md, HATP-GW-19..27).

`sign_decision` is the person's side (the inbox, a scripted approver in a demo); `verify_proof` the gateway's
(before a decision touches an ask); `apply_proof` verifies and then applies the decision to an AskRecord;
`check_decision_proofs` is the offline check a tool server or a coordinator runs on an Approval. Pure: no IO,
no clock (`now` is passed in), no randomness (the nonce is the caller's); used nonces are the caller's store.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.gateway import asks as core_asks
from hatp_mcp.core.gateway import machine as core_gateway
from hatp_mcp.core.gateway.ask_ids import approval_ask_id
from hatp_mcp.core.gateway.passkey import RelyingParty, verify_assertion
from hatp_mcp.core.gateway.terms import check_approval_terms, check_proof_terms
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.evidence import Approval, HumanDecision, HumanDecisionProof
from hatp_mcp.core.model.gateway import Answer, Ask, AskRecord
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.model.wire import WireError, parse
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.core.signing.keys import (
    Keyring,
    PublicKeyEntry,
    SignatureError,
    SigningKey,
)
from hatp_mcp.core.signing.models import sign_model, verify_raw
from hatp_mcp.errors import HatpError

__all__ = [
    "MAX_AGE",
    "MAX_SKEW",
    "HumanKeys",
    "apply_decision",
    "apply_proof",
    "ask_id_of",
    "check_answer_proof",
    "check_decision_proofs",
    "sign_decision",
    "subject_digest",
    "verify_proof",
]

# A proof is fresh for 10 minutes, and may be dated at most a minute ahead of the verifier's clock.
MAX_AGE = timedelta(minutes=10)
MAX_SKEW = timedelta(minutes=1)
_CODE = "DECISION_NOT_PROVEN"


@dataclass(frozen=True, slots=True)
class HumanKeys:
    """Each person's decision keys, as their verified cards list them: human -> Keyring (role "approver").

    Build it only from cards the Directory verified (`from_cards(directory.cards())`): a key counts for the
    person whose card lists it, and for nobody else. `cards` keeps those cards, so that a verifier can check each
    approver's roles and authority too (hatp_mcp/core/gateway/requirement.py); keys given without cards prove
    who decided, never that they could."""

    by_human: Mapping[str, Keyring] = field(default_factory=dict)
    cards: Mapping[str, HumanCard] = field(default_factory=dict)
    # The inbox's WebAuthn relying party: without it a passkey decision cannot be checked here, and is refused
    # (HATP-GW-70), never counted unchecked.
    passkey_rp: RelyingParty | None = None

    @classmethod
    def from_cards(cls, cards: Iterable[HumanCard], passkey_rp: RelyingParty | None = None) -> HumanKeys:
        out: dict[str, Keyring] = {}
        by_id: dict[str, HumanCard] = {}
        for card in cards:
            ring = Keyring()
            for k in card.keys:
                if k.type == "ed25519":
                    jwk = {"kty": "OKP", "crv": "Ed25519", "kid": k.id, "x": k.public_key, "roles": ["approver"]}
                    ring.add(PublicKeyEntry.from_jwk(jwk))
            out[card.id] = ring
            by_id[card.id] = card
        return cls(out, by_id, passkey_rp)

    def keyring_for(self, human: str) -> Keyring | None:
        return self.by_human.get(human)

    def names(self) -> dict[str, str]:
        """Display names by address, from the same cards: how a refusal names a person (HATP-GW-97)."""
        return {human: card.display_name for human, card in self.cards.items()}

    def use_cards(self, cards: Iterable[HumanCard]) -> None:
        """Hold these cards' keys instead, in place (spec/gateway.md HATP-GW-82): every holder of this HumanKeys
        (the configuration of a coordinator's running transactions) checks with them from its next check on.
        `cards` must be cards the Directory verified now. Raises TypeError for a HumanKeys not built by
        `from_cards` (its mappings are not its own to change)."""
        fresh = HumanKeys.from_cards(cards, self.passkey_rp)
        if not isinstance(self.by_human, dict) or not isinstance(self.cards, dict):
            raise TypeError("only a HumanKeys built by from_cards can take new cards")
        self.by_human.clear()
        self.by_human.update(fresh.by_human)
        self.cards.clear()
        self.cards.update(fresh.cards)


def subject_digest(ask: Ask) -> str:
    """What a proof about `ask` names: the plan (or tool-call) digest of an approval, the Ask's digest otherwise."""
    if ask.kind == "approve" and ask.plan_digest is not None:
        return ask.plan_digest
    return core_asks.ask_digest(ask)


def ask_id_of(approval: Approval) -> str:
    """The id of the ask an Approval closed (as the gateway numbers asks): `txnId/requirementId` for a plan,
    the approval id for a tool call."""
    if approval.subject == "plan" and approval.txn_id is not None:
        return approval_ask_id(approval.txn_id, approval.requirement_id)
    return approval.approval_id


def sign_decision(
    key: SigningKey,
    ask_id: str,
    subject: str,
    human: str,
    decision: str,
    now: datetime,
    *,
    nonce: str,
    value: str | dict[str, Any] | None = None,
    terms: ApprovalTerms | dict[str, Any] | None = None,
    reason: str | None = None,
) -> HumanDecisionProof:
    """The person's signed decision on one ask (`subject` is `subject_digest(ask)`), dated `now`.

    `nonce` must be fresh (16-128 characters, e.g. secrets.token_urlsafe(18)); `terms` are the ask's own
    (`ask.terms`, HATP-GW-32) when it has them; `reason`, why a reject (HATP-GW-87), signed with it. Raises
    pydantic.ValidationError for a malformed field."""
    proof = HumanDecisionProof.model_validate(
        ({"reason": reason} if reason else {})
        | {
            "askId": ask_id,
            "subjectDigest": subject,
            "human": human,
            "decision": decision,
            "value": value,
            "issuedAt": format_ts(now),
            "nonce": nonce,
            "terms": terms.wire() if isinstance(terms, ApprovalTerms) else terms,
        }
    )
    return sign_model(proof, key)


def _refuse(rule: str, reason: str, path: str, fix: str = "") -> HatpError:
    return HatpError(rule, reason, path=path, fix=fix or "have the person sign their decision again", code=_CODE)


def _parse(raw: object, path: str) -> tuple[HumanDecisionProof, Mapping[str, Any]]:
    """The proof and the document its signature is verified over (a parsed proof's wire form, checked whole)."""
    if isinstance(raw, HumanDecisionProof):
        raw = raw.wire()
    if not isinstance(raw, Mapping):
        raise _refuse("HATP-GW-19", "a decision counts only with the person's signed proof", path)
    try:
        proof = parse(HumanDecisionProof, dict(raw), path)
    except WireError as exc:
        raise _refuse("HATP-GW-19", f"the decision proof is malformed: {exc.reason}", exc.path) from exc
    if proof.signature is None:
        raise _refuse("HATP-GW-19", "the decision proof is unsigned", f"{path}.signature")
    if canonical(proof.wire()) != canonical(dict(raw)):
        # Embedded in an Approval it is re-serialized; a proof that does not survive that would not verify there.
        raise _refuse("HATP-GW-19", "the decision proof is not in normal form (drop null members)", path)
    return proof, raw


def _check_signature(proof: HumanDecisionProof, raw: Mapping[str, Any], humans: HumanKeys, path: str) -> None:
    """The person's key on their card signed `raw`."""
    ring = humans.keyring_for(proof.human)
    kid = proof.signature.kid if proof.signature else "?"
    if ring is None or kid not in ring:
        whose = "has no verified card" if ring is None else f"has no ed25519 key {kid!r} on their card"
        raise _refuse(
            "HATP-GW-20",
            f"{proof.human} {whose}: the proof is not signed by that person",
            f"{path}.signature.kid",
            "sign with the key the person's Directory-signed card lists",
        )
    try:
        verify_raw(raw, ring, "approver", path)
    except SignatureError as exc:
        raise _refuse(
            "HATP-GW-21", f"the proof's signature does not verify ({exc.rule}: {exc.reason})", exc.path
        ) from exc


def _check_binding(proof: HumanDecisionProof, ask_id: str, subject: str, path: str) -> None:
    if proof.ask_id != ask_id:
        raise _refuse("HATP-GW-22", f"the proof is for ask {proof.ask_id!r}, not {ask_id!r}", f"{path}.askId")
    if proof.subject_digest != subject:
        raise _refuse(
            "HATP-GW-23",
            f"the proof is about {proof.subject_digest}, the ask is about {subject}",
            f"{path}.subjectDigest",
            "show the person the ask as it is and have them sign that",
        )


def _check_fresh(
    proof: HumanDecisionProof, at: datetime, path: str, max_age: timedelta, *, recorded: bool = False
) -> None:
    """HATP-GW-25: issued within `max_age` before `at` (and at most MAX_SKEW after it). `at` is the gateway's clock,
    or with `recorded` the time the record says the person decided (an offline check of an Approval or Answer)."""
    issued = parse_ts(proof.issued_at)
    if issued > at + MAX_SKEW or at - issued > max_age:
        window = f"{int(max_age.total_seconds())} s (and at most {int(MAX_SKEW.total_seconds())} s ahead)"
        if recorded:  # HATP-GW-97: an offline check's refusal may become a signed vote's reason: no "(N min ago)"
            why = f"{when_words(proof.issued_at)}; only proofs from the {window} before the decision recorded at "
            why += f"{when_words(format_ts(at))} count"
        else:  # the gateway's clock, read at once: how long ago, in words
            why = f"{when_words(proof.issued_at, at)}; only proofs from the last {window} count"
        raise _refuse("HATP-GW-25", f"the proof was issued at {why}", f"{path}.issuedAt")


def verify_proof(
    raw: object,
    *,
    ask: Ask,
    humans: HumanKeys,
    now: datetime,
    nonce_used: bool,
    max_age: timedelta = MAX_AGE,
    path: str = "$.proof",
) -> HumanDecisionProof:
    """Return the proof when the person it names signed exactly this decision on `ask`, recently, once.

    Raises HatpError HATP-GW-19 (missing, malformed, unsigned), HATP-GW-20 (the key is not an ed25519 key on
    that person's card), HATP-GW-21 (forged or altered), HATP-GW-22 (another ask), HATP-GW-23 (another
    subject), HATP-GW-25 (stale or from the future), HATP-GW-32 (signed over other terms than the ask's),
    HATP-GW-26 (the nonce was used before)."""
    proof, doc = _parse(raw, path)
    _check_signature(proof, doc, humans, path)
    _check_binding(proof, ask.ask_id, subject_digest(ask), path)
    _check_fresh(proof, now, path, max_age)
    check_proof_terms(proof, ask.terms, path)
    if nonce_used:
        raise _refuse("HATP-GW-26", f"nonce {proof.nonce!r} was used before: a proof counts once", f"{path}.nonce")
    return proof


def apply_decision(
    rec: AskRecord,
    proof: HumanDecisionProof,
    now: datetime,
    via: str = "inbox",
    names: Mapping[str, str] | None = None,
) -> AskRecord:
    """Apply a proof's decision to an ask WITHOUT verifying it (verify_proof first, or use apply_proof; the
    inbox uses this alone to preview). `names`: display names by address for the words (HATP-GW-97). Raises the
    gateway core's HatpError (HATP-GW-5/6/11/12/14, HATP-ASK-*)."""
    if proof.decision in ("approve", "reject"):
        return core_gateway.decide(
            rec, proof.human, proof.decision, now, via, proof=proof, reason=proof.reason, names=names
        )
    if proof.decision == "answer":
        return core_asks.answer(rec, proof.human, proof.value, now, via, proof=proof, names=names)
    return core_gateway.decline(rec, proof.human, now, names)


def apply_proof(
    rec: AskRecord, raw: object, *, humans: HumanKeys, now: datetime, nonce_used: bool, via: str = "inbox"
) -> tuple[AskRecord, HumanDecisionProof]:
    """Verify a proof against `rec`'s ask, then apply it. Raises HatpError (verify_proof's, then the core's)."""
    proof = verify_proof(raw, ask=rec.ask, humans=humans, now=now, nonce_used=nonce_used)
    if "passkey=required" in rec.ask.address and proof.decision in ("approve", "reject"):
        raise _refuse(
            "HATP-GW-70",
            "the group requires a passkey: a decision signed with an Ed25519 key does not count here",
            "$.proof",
            "decide in the inbox with the passkey on your card",
        )
    return apply_decision(rec, proof, now, via, humans.names()), proof


def check_decision_proofs(approval: Approval, humans: HumanKeys, path: str = "$") -> None:
    """Offline: every human decision in `approval` carries its approver's valid proof of exactly that decision,
    on this ask and subject, issued within MAX_AGE before the gateway recorded it, each nonce once.

    Raises HatpError HATP-GW-27 (a decision without a proof), the proof's own rule (HATP-GW-19..26) or
    HATP-GW-32 (a proof over other terms than the Approval's)."""
    ask_id, seen = ask_id_of(approval), set[str]()
    counts: dict[str, int] = {}
    passkey_group = "passkey=required" in approval.routing.address
    for i, d in enumerate(approval.decisions):
        where = f"{path}.decisions[{i}].proof"
        if d.passkey is not None or passkey_group:
            _check_passkey_decision(approval, d, humans, ask_id, counts, seen, f"{path}.decisions[{i}].passkey")
            continue
        if d.proof is None:
            raise _refuse(
                "HATP-GW-27",
                f"the decision of {d.approver} carries no proof: only the gateway says they decided",
                where,
                "ask the gateway for an approval whose decisions carry the people's proofs",
            )
        proof, doc = _parse(d.proof, where)
        _check_signature(proof, doc, humans, where)
        _check_binding(proof, ask_id, approval.plan_digest, where)
        if proof.human != d.approver or proof.decision != d.decision:
            raise _refuse(
                "HATP-GW-24",
                f"the proof says {proof.human} decided {proof.decision!r}; the approval records {d.approver} "
                f"deciding {d.decision!r}",
                where,
            )
        if proof.reason != d.reason:
            raise _refuse(
                "HATP-GW-87",
                f"the approval records {d.approver}'s reason as {d.reason!r}; their proof signs {proof.reason!r}",
                f"{path}.decisions[{i}].reason",
                "record a person's reason exactly as their proof signs it",
            )
        _check_fresh(proof, parse_ts(d.decided_at), where, MAX_AGE, recorded=True)
        if proof.nonce in seen:
            raise _refuse("HATP-GW-26", f"nonce {proof.nonce!r} appears twice in one approval", f"{where}.nonce")
        seen.add(proof.nonce)
    check_approval_terms(approval, path)


def _check_passkey_decision(
    approval: Approval,
    d: HumanDecision,
    humans: HumanKeys,
    ask_id: str,
    counts: dict[str, int],
    seen: set[str],
    where: str,
) -> None:
    """HATP-GW-70: in a `passkey=required` group only a passkey proves a decision; a passkey decision verifies
    against the approver's signed card (HATP-GW-67..69) with the organisation's relying party, its nonce once."""
    a = d.passkey
    if a is None:
        raise _refuse(
            "HATP-GW-70",
            f"{d.approver}'s {d.decision} is not proven by a passkey, and the group requires one",
            where,
            "decide in the inbox with the passkey on the card",
        )
    if humans.passkey_rp is None:
        raise _refuse(
            "HATP-GW-70",
            "a passkey decision, and no relying party (rpId, origins) to check it with: not checked, not counted",
            where,
            "give the verifier the organisation's gateway.json (passkey: rpId, origins)",
        )
    if a.human != d.approver or a.decision != d.decision:
        raise _refuse("HATP-GW-67", "the assertion proves another person or decision", where)
    if a.reason != d.reason:
        raise _refuse(
            "HATP-GW-87",
            f"the approval records {d.approver}'s reason as {d.reason!r}; their passkey signed {a.reason!r}",
            f"{where.removesuffix('.passkey')}.reason",
            "record a person's reason exactly as their passkey signed it",
        )
    if a.nonce in seen:
        raise _refuse("HATP-GW-26", f"nonce {a.nonce!r} appears twice in one approval", f"{where}.nonce")
    seen.add(a.nonce)
    counts[a.credential_id] = verify_assertion(
        a,
        humans.cards.get(d.approver),
        humans.passkey_rp,
        ask_id=ask_id,
        subject_digest=approval.plan_digest,
        decision=d.decision,
        last_count=counts.get(a.credential_id, 0),
        path=where,
    )


def check_answer_proof(answer: Answer, humans: HumanKeys, path: str = "$") -> None:
    """Offline: the Answer carries its answerer's valid proof of exactly this answer to this ask: their signed
    decision, or their passkey assertion over it (HATP-GW-80, checked against their card with the organisation's
    relying party; without the relying party it is refused, not counted unchecked).

    Raises HatpError HATP-GW-27 (no proof), the proof's own rule (HATP-GW-19..25) or the assertion's
    (HATP-GW-67..70, HATP-GW-80)."""
    if answer.passkey is not None:
        where = f"{path}.passkey"
        a = answer.passkey
        if humans.passkey_rp is None:
            raise _refuse(
                "HATP-GW-70",
                "a passkey answer, and no relying party (rpId, origins) to check it with: not checked, not counted",
                where,
                "give the verifier the organisation's gateway.json (passkey: rpId, origins)",
            )
        if a.human != answer.answerer:
            raise _refuse("HATP-GW-67", f"the assertion is {a.human}'s, the answer {answer.answerer}'s", where)
        verify_assertion(
            a,
            humans.cards.get(answer.answerer),
            humans.passkey_rp,
            ask_id=answer.ask_id,
            subject_digest=answer.subject_digest,
            decision="answer",
            value=answer.value,
            path=where,
        )
        return
    where = f"{path}.proof"
    if answer.proof is None:
        raise _refuse("HATP-GW-27", f"the answer of {answer.answerer} carries no proof", where)
    proof, doc = _parse(answer.proof, where)
    _check_signature(proof, doc, humans, where)
    _check_binding(proof, answer.ask_id, answer.subject_digest, where)
    if (proof.human, proof.decision, proof.value) != (answer.answerer, "answer", answer.value):
        raise _refuse(
            "HATP-GW-24",
            f"the proof says {proof.human} decided {proof.decision!r} ({proof.value!r}); the answer records "
            f"{answer.answerer} answering {answer.value!r}",
            where,
        )
    _check_fresh(proof, parse_ts(answer.answered_at), where, MAX_AGE, recorded=True)

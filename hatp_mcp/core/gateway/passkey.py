"""Passkeys as the decision proof (spec/gateway.md HATP-GW-67..70). Pure: no IO, no clock (`now` is an argument).

A person decides in the web inbox with their passkey. The WebAuthn challenge is the SHA-256 of the canonical JSON
of `{askId, subjectDigest, decision, nonce, issuedAt}` (`decision_challenge`): the assertion proves exactly this
decision on exactly this subject, so an approve cannot be made of a reject, nor moved to another ask or plan.
`verify_assertion` checks one PasskeyAssertion against the person's Directory-signed card, offline, with the
relying party's id and origin(s) the organisation configures: the challenge recomputed from the payload, the
credential listed as a passkey on the card, clientData type `webauthn.get` and its origin exact, the rpId hash
exact, user presence and user verification flags set, the ES256 signature over authenticatorData and the
clientData hash (py_webauthn, `webauthn` on PyPI), and the sign counter moving forward from `last_count`.

A card's passkey entry is `{"type": "passkey", "id": <credential id, base64url>, "publicKey": <COSE key,
base64url>}`: only the Directory adds it (HATP-GW-71), so a credential that is not on a signed card never counts.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.gateway import asks as core_asks
from hatp_mcp.core.gateway import machine as core_gateway
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.evidence import PasskeyAssertion
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.errors import HatpError

__all__ = [
    "RelyingParty",
    "apply_passkey",
    "b64u",
    "decision_challenge",
    "decision_payload",
    "passkey_counts",
    "unb64u",
    "verify_assertion",
]

MAX_AGE = timedelta(minutes=10)  # like an Ed25519 proof (HATP-GW-25)
_AHEAD = timedelta(minutes=1)  # how far ahead of the gateway's clock an assertion may be issued (HATP-GW-25)


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class RelyingParty:
    """The WebAuthn relying party the organisation's inbox is: its rpId and the exact origin(s) it is served at."""

    rp_id: str
    origins: tuple[str, ...]


def decision_payload(
    ask_id: str,
    subject_digest: str,
    decision: str,
    nonce: str,
    issued_at: str,
    value: Any = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """The decided payload; an answer (decision "answer", HATP-GW-80) carries its `value`, nothing else does; a
    reject may carry the person's `reason` (HATP-GW-87), bound into the challenge like the rest."""
    payload: dict[str, Any] = {
        "askId": ask_id,
        "subjectDigest": subject_digest,
        "decision": decision,
        "nonce": nonce,
        "issuedAt": issued_at,
    }
    if decision == "answer":
        payload["value"] = value
    if decision == "reject" and reason is not None:
        payload["reason"] = reason
    return payload


def decision_challenge(
    ask_id: str,
    subject_digest: str,
    decision: str,
    nonce: str,
    issued_at: str,
    value: Any = None,
    reason: str | None = None,
) -> bytes:
    """HATP-GW-67 (and HATP-GW-80 for an answer, HATP-GW-87 for a reject's reason): SHA-256 of the canonical JSON
    of the decided payload."""
    payload = decision_payload(ask_id, subject_digest, decision, nonce, issued_at, value, reason)
    return hashlib.sha256(canonical(payload)).digest()


def _refuse(rule: str, reason: str, path: str, code: str, fix: str = "") -> HatpError:
    return HatpError(rule, reason, path=path, code=code, fix=fix)


def verify_assertion(
    a: PasskeyAssertion,
    card: HumanCard | None,
    rp: RelyingParty,
    *,
    ask_id: str,
    subject_digest: str,
    decision: str | None = None,
    value: Any = None,
    last_count: int = 0,
    now: datetime | None = None,
    path: str = "$",
) -> int:
    """Check one passkey decision (HATP-GW-67..69, HATP-GW-80); returns the authenticator's new sign count.

    `decision`, when given, is the decision the caller is about to count (an approve must be proven as approve);
    with decision "answer", `value` is the answer the caller is about to count, and the assertion must carry
    exactly it. `now`, when given, bounds the payload's age like a proof's (HATP-GW-25). Raises HatpError.
    """
    if a.ask_id != ask_id or a.subject_digest != subject_digest:
        raise _refuse(
            "HATP-GW-67",
            f"the assertion is for ask {a.ask_id} / {a.subject_digest}, not {ask_id} / {subject_digest}",
            f"{path}.subjectDigest",
            "PASSKEY_WRONG_SUBJECT",
        )
    if decision is not None and a.decision != decision:
        raise _refuse(
            "HATP-GW-67",
            f"the assertion proves {a.decision!r}, not {decision!r}",
            f"{path}.decision",
            "PASSKEY_WRONG_DECISION",
        )
    if (a.decision == "answer") != (a.value is not None):
        raise _refuse(
            "HATP-GW-80",
            "an answer's assertion carries its value, and only an answer's does",
            f"{path}.value",
            "PASSKEY_WRONG_ANSWER",
        )
    if a.reason is not None and a.decision != "reject":
        raise _refuse(
            "HATP-GW-87",
            "a reason goes with a reject, and only a reject's assertion carries one",
            f"{path}.reason",
            "PASSKEY_WRONG_DECISION",
        )
    if decision == "answer" and canonical(a.value) != canonical(value):
        raise _refuse(
            "HATP-GW-80",
            "the assertion proves another answer than the one recorded",
            f"{path}.value",
            "PASSKEY_WRONG_ANSWER",
        )
    if now is not None:
        issued = parse_ts(a.issued_at)
        if issued < now - MAX_AGE or issued > now + _AHEAD:
            raise _refuse(  # HATP-GW-97: the gateway's clock, read at once: the time in words and how long ago
                "HATP-GW-25",
                f"the assertion was issued at {when_words(a.issued_at, now)}; only assertions from the last "
                f"{int(MAX_AGE.total_seconds())} s (and at most {int(_AHEAD.total_seconds())} s ahead) count",
                f"{path}.issuedAt",
                "STALE",
            )
    if card is None or card.id != a.human:
        raise _refuse(
            "HATP-GW-68", f"no signed card for {a.human}", f"{path}.human", "PASSKEY_NOT_ON_CARD", "enrol first"
        )
    key = next((k for k in card.keys if k.type == "passkey" and k.id == a.credential_id), None)
    if key is None:
        raise _refuse(
            "HATP-GW-68",
            f"credential {a.credential_id[:16]}... is not a passkey on {a.human}'s signed card",
            f"{path}.credentialId",
            "PASSKEY_NOT_ON_CARD",
            "a passkey counts once the Directory put it on the card (HATP-GW-71)",
        )
    challenge = decision_challenge(a.ask_id, a.subject_digest, a.decision, a.nonce, a.issued_at, a.value, a.reason)
    try:
        client = json.loads(unb64u(a.client_data_json))
    except ValueError:
        raise _refuse("HATP-GW-68", "clientDataJSON is not JSON", f"{path}.clientDataJSON", "PASSKEY_INVALID") from None
    if not isinstance(client, dict) or client.get("challenge") != b64u(challenge):
        raise _refuse(
            "HATP-GW-67",
            "the assertion signed another challenge than this payload's",
            f"{path}.clientDataJSON",
            "PASSKEY_WRONG_CHALLENGE",
        )
    auth = unb64u(a.authenticator_data)
    if len(auth) < 37:
        raise _refuse("HATP-GW-68", "authenticatorData is too short", f"{path}.authenticatorData", "PASSKEY_INVALID")
    if not auth[32] & 0x04:
        raise _refuse("HATP-GW-68", "user verification was not performed", f"{path}.authenticatorData", "PASSKEY_NO_UV")
    count = int.from_bytes(auth[33:37], "big")
    if (count or last_count) and count <= last_count:
        raise _refuse(
            "HATP-GW-69",
            f"the sign counter went from {last_count} to {count}: a cloned authenticator or a replay",
            f"{path}.authenticatorData",
            "PASSKEY_COUNTER",
        )
    credential = {
        "id": a.credential_id,
        "rawId": a.credential_id,
        "type": "public-key",
        "response": {
            "authenticatorData": a.authenticator_data,
            "clientDataJSON": a.client_data_json,
            "signature": a.signature,
            **({"userHandle": a.user_handle} if a.user_handle else {}),
        },
    }
    # py_webauthn (with pyOpenSSL and cbor2) is imported at the first passkey checked: a record's check imports this
    # module for its proofs, and most records carry none.
    from webauthn import verify_authentication_response
    from webauthn.helpers.exceptions import InvalidAuthenticationResponse

    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=challenge,
            expected_rp_id=rp.rp_id,
            expected_origin=list(rp.origins),
            credential_public_key=unb64u(key.public_key),
            credential_current_sign_count=last_count,
            require_user_verification=True,
        )
    except InvalidAuthenticationResponse as exc:
        reason = str(exc)
        code = "PASSKEY_WRONG_ORIGIN" if "origin" in reason.lower() else "PASSKEY_INVALID"
        code = "PASSKEY_WRONG_RP" if "rp id" in reason.lower() or "rpid" in reason.lower() else code
        raise _refuse("HATP-GW-68", reason[:300], f"{path}", code) from None
    except (ValueError, KeyError, TypeError) as exc:
        raise _refuse("HATP-GW-68", f"unreadable assertion: {exc}"[:300], f"{path}", "PASSKEY_INVALID") from None
    return int(verified.new_sign_count)


def apply_passkey(
    rec: AskRecord,
    a: PasskeyAssertion,
    card: HumanCard | None,
    rp: RelyingParty,
    *,
    subject_digest: str,
    now: datetime,
    nonce_used: bool,
    last_count: int,
    via: str = "inbox",
) -> tuple[AskRecord, int]:
    """The gateway's side: verify a passkey decision on `rec`'s ask (`subject_digest`: what a proof about the ask
    names, core/gateway/proof.py subject_digest), then record it (approve, reject, decline, or the answer to a
    question ask). Returns the record and the credential's new sign count.
    Raises HatpError (HATP-GW-25/26/67..69/76, then the core's: HATP-ASK-2..4 for an answer that does not fit)."""
    count = verify_assertion(
        a, card, rp, ask_id=rec.ask.ask_id, subject_digest=subject_digest, last_count=last_count, now=now
    )
    if nonce_used:
        raise _refuse(
            "HATP-GW-26", f"nonce {a.nonce!r} was used before: a decision counts once", "$.nonce", "NONCE_REUSED"
        )
    names = {card.id: card.display_name} if card is not None else None  # HATP-GW-97: the decider by name
    if a.decision in ("approve", "reject"):
        return core_gateway.decide(rec, a.human, a.decision, now, via, passkey=a, reason=a.reason, names=names), count
    if a.decision == "decline":
        return core_gateway.decline(rec, a.human, now, names), count
    return core_asks.answer(rec, a.human, a.value, now, via, passkey=a, names=names), count


def passkey_counts(assertions: Sequence[PasskeyAssertion]) -> dict[str, int]:
    """The last sign count seen per credential (from authenticatorData), for a gateway that restarts."""
    out: dict[str, int] = {}
    for a in assertions:
        auth = unb64u(a.authenticator_data)
        if len(auth) >= 37:
            out[a.credential_id] = max(out.get(a.credential_id, 0), int.from_bytes(auth[33:37], "big"))
    return out

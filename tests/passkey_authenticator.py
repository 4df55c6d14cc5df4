"""A software WebAuthn authenticator for tests: an ES256 credential whose assertions are built byte for byte as an
authenticator builds them (authenticatorData = rpIdHash | flags | signCount, signature over authenticatorData and
the SHA-256 of clientDataJSON). Lets the core's checks be broken on purpose one field at a time; the browser tests
use Chromium's CDP virtual authenticator instead. Test code only."""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from hatp_mcp.core.gateway.passkey import b64u, decision_challenge, unb64u
from hatp_mcp.core.model.evidence import PasskeyAssertion

__all__ = ["ORIGIN", "RP_ID", "SoftAuthenticator"]

RP_ID = "localhost"
ORIGIN = "http://localhost:8400"


class SoftAuthenticator:
    def __init__(self, human: str) -> None:
        self.human = human
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = b64u(secrets.token_bytes(16))
        self.count = 0

    def cose_key(self) -> bytes:
        nums = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: nums.x.to_bytes(32, "big"), -3: nums.y.to_bytes(32, "big")})

    def card_key(self) -> dict[str, str]:
        return {"type": "passkey", "id": self.credential_id, "publicKey": b64u(self.cose_key())}

    def registration_json(self, challenge: bytes, *, origin: str = ORIGIN, rp_id: str = RP_ID) -> dict[str, Any]:
        """What a browser posts after navigator.credentials.create(): this credential with a "none" attestation
        (authenticatorData with the attested credential: zero AAGUID, the credential id, the COSE public key)."""
        client = json.dumps({"type": "webauthn.create", "challenge": b64u(challenge), "origin": origin}).encode()
        raw_id = unb64u(self.credential_id)
        auth = hashlib.sha256(rp_id.encode()).digest() + bytes([0x01 | 0x04 | 0x40]) + (0).to_bytes(4, "big")
        auth += bytes(16) + len(raw_id).to_bytes(2, "big") + raw_id + self.cose_key()
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth})
        response = {"clientDataJSON": b64u(client), "attestationObject": b64u(attestation), "transports": ["internal"]}
        return {"id": self.credential_id, "rawId": self.credential_id, "type": "public-key", "response": response}

    def credential_json(
        self, challenge: bytes, *, origin: str = ORIGIN, rp_id: str = RP_ID, uv: bool = True, count: int | None = None
    ) -> dict[str, Any]:
        """What a browser posts after navigator.credentials.get(): the assertion over `challenge`."""
        client = json.dumps({"type": "webauthn.get", "challenge": b64u(challenge), "origin": origin}).encode()
        self.count = self.count + 1 if count is None else count
        auth = (
            hashlib.sha256(rp_id.encode()).digest()
            + bytes([0x01 | (0x04 if uv else 0)])
            + self.count.to_bytes(4, "big")
        )
        sig = self.key.sign(auth + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256()))
        response = {"authenticatorData": b64u(auth), "clientDataJSON": b64u(client), "signature": b64u(sig)}
        return {"id": self.credential_id, "rawId": self.credential_id, "type": "public-key", "response": response}

    def decide(
        self,
        ask_id: str,
        subject_digest: str,
        decision: str,
        issued_at: str,
        *,
        nonce: str | None = None,
        origin: str = ORIGIN,
        rp_id: str = RP_ID,
        uv: bool = True,
        count: int | None = None,
        flip_signature: bool = False,
        challenge_for: dict[str, str] | None = None,
        reason: str | None = None,
    ) -> PasskeyAssertion:
        """An assertion over the decision payload (or, with `challenge_for`, over another payload's challenge);
        `reason`, a reject's reason bound into it (HATP-GW-87)."""
        nonce = nonce or secrets.token_urlsafe(18)
        signed = {"ask_id": ask_id, "subject_digest": subject_digest, "decision": decision, "nonce": nonce}
        signed |= {"issued_at": issued_at} | (challenge_for or {})
        challenge = decision_challenge(
            signed["ask_id"],
            signed["subject_digest"],
            signed["decision"],
            signed["nonce"],
            signed["issued_at"],
            reason=reason,
        )
        client = json.dumps({"type": "webauthn.get", "challenge": b64u(challenge), "origin": origin}).encode()
        self.count = self.count + 1 if count is None else count
        flags = 0x01 | (0x04 if uv else 0)
        auth = hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + self.count.to_bytes(4, "big")
        sig = self.key.sign(auth + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256()))
        if flip_signature:
            sig = sig[:-1] + bytes([sig[-1] ^ 0x01])
        raw: dict[str, Any] = {
            "askId": ask_id,
            "subjectDigest": subject_digest,
            "human": self.human,
            "decision": decision,
            "nonce": nonce,
            "issuedAt": issued_at,
            "credentialId": self.credential_id,
            "authenticatorData": b64u(auth),
            "clientDataJSON": b64u(client),
            "signature": b64u(sig),
        }
        if reason is not None:
            raw["reason"] = reason
        return PasskeyAssertion.model_validate(raw)

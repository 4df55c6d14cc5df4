"""The Ed25519 signatures a tool-call approval carries, found ahead of the checks so that they can be verified
together (on two threads: `cryptography` releases the interpreter lock while it verifies).

`signed_parts` names each signature the gate's checks will verify, exactly as they will verify it: the gateway's
over the approval as received, each person's over their proof's wire form, the agent's over its request's wire
form, each with the keyring the check takes its key from. `verify_part` verifies one through that keyring's own
`check_signature`, which remembers a triple (key, signature, message bytes) that verified, so that the check,
when it reaches that signature, finds exactly those bytes verified and does not verify them again.

Nothing here decides anything: a signature that does not verify, a kid no keyring holds, a member that is not
what it should be are left out or left unverified, and the checks themselves (hatp_mcp/core/gated_tools/checks.py)
then refuse the approval with their own rule, in their own order. Pure: no IO, no threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature

from hatp_mcp.core.gateway.agents import AgentKeys
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.model.base import Signature
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.signing.canonical import CanonicalError
from hatp_mcp.core.signing.keys import ALG, Keyring, PublicKeyEntry, b64u_decode, signing_bytes

__all__ = ["SignedPart", "signed_parts", "verify_part"]


@dataclass(frozen=True, slots=True)
class SignedPart:
    """One signature to verify: `signature` by `entry`'s key over `message`, through `ring` (which remembers it)."""

    ring: Keyring
    entry: PublicKeyEntry
    signature: bytes
    message: bytes


def _part(ring: Keyring | None, obj: dict[str, Any], signature: object) -> SignedPart | None:
    """The part `obj`'s signature stands for, or None where the check would refuse before any verification."""
    if ring is None:
        return None
    alg: object
    kid: object
    sig: object
    if isinstance(signature, Signature):
        alg, kid, sig = signature.alg, signature.kid, signature.sig
    elif isinstance(signature, dict):
        alg, kid, sig = signature.get("alg"), signature.get("kid"), signature.get("sig")
    else:
        return None
    if alg != ALG or not isinstance(kid, str) or not isinstance(sig, str):
        return None
    entry = ring.get(kid)
    if entry is None:
        return None
    try:
        return SignedPart(ring, entry, b64u_decode(sig), signing_bytes(obj))
    except (ValueError, CanonicalError):
        return None


def signed_parts(
    doc: dict[str, Any], approval: Approval, trusted: Keyring, humans: HumanKeys, agents: AgentKeys | None
) -> list[SignedPart]:
    """The signatures check_approval verifies in `approval` (parsed from `doc`), in the order it verifies them:
    the gateway's, the agent's request (with `agents`), each decision's proof (passkey decisions are checked by
    their own WebAuthn path, not here)."""
    parts = [_part(trusted, doc, doc.get("signature"))]
    request = approval.request
    if agents is not None and request is not None and request.signature is not None:
        parts.append(_part(agents.keyring_for(request.agent), request.wire(), request.signature))
    for d in approval.decisions:
        proof = d.proof
        if proof is not None and d.passkey is None and proof.signature is not None:
            parts.append(_part(humans.keyring_for(proof.human), proof.wire(), proof.signature))
    return [p for p in parts if p is not None]


def verify_part(part: SignedPart) -> bool:
    """Verify one part through its keyring (which remembers it when it verifies); whether it verified."""
    try:
        part.ring.check_signature(part.entry, part.signature, part.message)
    except InvalidSignature:
        return False
    return True

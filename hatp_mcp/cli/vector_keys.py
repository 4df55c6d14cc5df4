"""The test-only keys of the interop vectors (spec/vectors/keys.json): Ed25519 seeds derived from their names,
`sha256("hatp interop vector key: <name>")`, so anyone can rebuild them, and the party each speaks for (the
participants are the vector plan's own, spec/fixtures/hatp/trip.valid.json). Public test vectors: never trust
them for anything.
"""

from __future__ import annotations

import hashlib

from hatp_mcp.core.signing.keys import Keyring, SigningKey, b64u

__all__ = ["KEYS", "key", "keyring"]

# name -> (roles, party)
KEYS: dict[str, tuple[list[str], str]] = {
    "coordinator": (["coordinator"], "coordinator://acme.com/coord-1"),
    "airline": (["participant"], "https://airline.example/mcp"),
    "hotel": (["participant"], "https://hotel.example/mcp"),
    "calendar": (["participant"], "https://calendar.example/mcp"),
    "payments": (["participant"], "https://payments.example/mcp"),
    "gateway": (["gateway"], "gateway://acme.com"),
    "alice": (["approver"], "human://acme.com/alice"),
}


def key(name: str) -> SigningKey:
    """The vector key `name`, rebuilt from its seed."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    seed = hashlib.sha256(f"hatp interop vector key: {name}".encode()).digest()
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    x = b64u(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))
    roles, _party = KEYS[name]
    return SigningKey.from_jwk({"kty": "OKP", "crv": "Ed25519", "kid": name, "x": x, "d": b64u(seed), "roles": roles})


def keyring(*names: str) -> Keyring:
    """The public keys `names`, each bound to its party (HATP-SIG-6)."""
    ring = Keyring()
    for name in names:
        ring.add_signer(key(name), KEYS[name][1])
    return ring

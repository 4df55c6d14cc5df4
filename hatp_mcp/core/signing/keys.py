"""Ed25519 keys as JWKs, keyrings, and signing / verifying evidence.

A signed object carries ``signature: {alg, kid, sig}`` computed over the RFC 8785 canonical form of the object
without its ``signature`` member. A keyring maps kid -> public key plus the roles that key may sign for; a
signature is accepted only from a known kid, with alg EdDSA, over unchanged bytes, by a key allowed for the role
the verifier expects. An entry may also name the party (a URI) the key speaks for: such a key signs only as that
party (HATP-SIG-6; callers compare the party the evidence names, see `check_party`). Each refusal has its own rule
id (HATP-SIG-1..6). This module does no IO.
"""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from hatp_mcp.core.signing.canonical import CanonicalError, canonical
from hatp_mcp.errors import HatpError

__all__ = [
    "ALG",
    "ROLES",
    "Keyring",
    "PublicKeyEntry",
    "SignatureError",
    "SigningKey",
    "b64u",
    "b64u_decode",
    "check_party",
    "check_role",
    "sign_object",
    "signing_bytes",
    "unsigned",
    "verify_object",
]

ALG = "EdDSA"
# Who may sign what. A key lists the roles it is trusted for; a verifier names the role it expects.
ROLES = frozenset({"coordinator", "participant", "gateway", "directory", "approver", "server", "agent", "journal"})


def _json_type(value: object) -> str:
    """The JSON name of a parsed value's type, for an error that says what was found instead."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


class SignatureError(HatpError):
    """A signature that cannot be accepted. `rule` says which check failed."""


_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
_TO_URL = bytes.maketrans(b"+/", b"-_")


def b64u(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).translate(_TO_URL).rstrip(b"=").decode("ascii")


def b64u_decode(text: str) -> bytes:
    """Decode unpadded base64url. Raises ValueError for any text that is not exactly what `b64u` writes for the
    bytes it decodes to: padding, a character outside the alphabet (a lenient decoder drops it), stray bits in the
    last character. So one byte string has one text, and a signature cannot be rewritten into another text that
    still verifies (HATP-SIG-1)."""
    try:
        coded = text.encode("ascii")
        raw = binascii.a2b_base64(coded.translate(_TO_STANDARD) + b"=" * (-len(coded) % 4), strict_mode=True)
    except (binascii.Error, AttributeError, TypeError, ValueError) as exc:
        raise ValueError("not unpadded base64url") from exc
    if b64u(raw) != text:  # HATP-SIG-1: one text per byte string ("+" and "/" come back as "-" and "_")
        raise ValueError("not unpadded base64url: another text than the one its bytes have")
    return raw


def _kid_for(public_raw: bytes) -> str:
    # RFC 7638-style thumbprint, shortened: stable, derived from the key, so kids cannot collide by accident.
    return b64u(hashlib.sha256(canonical({"crv": "Ed25519", "kty": "OKP", "x": b64u(public_raw)})).digest())[:22]


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A private Ed25519 key with its kid and the roles it signs for."""

    kid: str
    private: Ed25519PrivateKey = field(repr=False)
    roles: tuple[str, ...] = ()

    @classmethod
    def generate(cls, roles: Iterable[str] = (), kid: str | None = None) -> SigningKey:
        priv = Ed25519PrivateKey.generate()
        raw = priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return cls(kid or _kid_for(raw), priv, tuple(sorted(set(roles))))

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> SigningKey:
        """Load a private JWK. Raises ValueError naming what is wrong (a value that is not a JSON object too)."""
        if not isinstance(jwk, Mapping):
            raise ValueError(f"a private key is a JWK (a JSON object), not a JSON {_json_type(jwk)}")
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise ValueError("a private key must be a JWK with kty OKP and crv Ed25519")
        try:
            d = b64u_decode(jwk["d"])
            priv = Ed25519PrivateKey.from_private_bytes(d)
        except (KeyError, ValueError) as exc:
            raise ValueError("the JWK's 'd' is not a 32-byte base64url Ed25519 private key") from exc
        public = PublicKeyEntry.from_jwk(jwk)
        if public.raw() != priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw):
            raise ValueError("the JWK's 'x' does not match its 'd'")
        return cls(public.kid, priv, public.roles)

    def public_raw(self) -> bytes:
        return self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    def public_jwk(self, party: str | None = None) -> dict[str, Any]:
        """The public JWK; `party` (the URI this key speaks for) is written as the entry's `party` when given."""
        jwk: dict[str, Any] = {"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "x": b64u(self.public_raw())}
        if self.roles:
            jwk["roles"] = list(self.roles)
        if party is not None:
            jwk["party"] = party
        return jwk

    def private_jwk(self) -> dict[str, Any]:
        raw = self.private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        return {**self.public_jwk(), "d": b64u(raw)}

    def sign(self, data: bytes) -> str:
        return b64u(self.private.sign(data))


@dataclass(frozen=True, slots=True)
class PublicKeyEntry:
    """A trusted public key: its kid, the roles it may sign as, and (optionally) the one party it speaks for."""

    kid: str
    key: Ed25519PublicKey
    roles: tuple[str, ...]
    party: str | None = None
    _raw: bytes = field(init=False, repr=False, compare=False)  # the key's 32 bytes, read once

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_raw", self.key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        )

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any]) -> PublicKeyEntry:
        """Load a public JWK. Raises ValueError naming what is wrong (a value that is not a JSON object too)."""
        if not isinstance(jwk, Mapping):
            raise ValueError(f"a key is a JWK (a JSON object), not a JSON {_json_type(jwk)}")
        if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            raise ValueError("a key must be a JWK with kty OKP and crv Ed25519")
        kid = jwk.get("kid")
        if not isinstance(kid, str) or not kid:
            raise ValueError("a key needs a non-empty string 'kid'")
        try:
            raw = b64u_decode(jwk["x"])
            key = Ed25519PublicKey.from_public_bytes(raw)
        except (KeyError, ValueError) as exc:
            raise ValueError(f"key {kid!r}: 'x' is not a 32-byte base64url Ed25519 public key") from exc
        roles = jwk.get("roles", [])
        if not isinstance(roles, list) or not all(isinstance(r, str) and r in ROLES for r in roles):
            raise ValueError(f"key {kid!r}: 'roles' must be a list drawn from {sorted(ROLES)}")
        party = jwk.get("party")
        if party is not None and (not isinstance(party, str) or not 1 <= len(party) <= 500):
            raise ValueError(f"key {kid!r}: 'party' must be the URI (1 to 500 characters) of the party it speaks for")
        return cls(kid, key, tuple(sorted(set(roles))), party)

    def with_party(self, party: str) -> PublicKeyEntry:
        """This key bound to `party`. Raises ValueError if it is already bound to another party."""
        if self.party is not None and self.party != party:
            raise ValueError(f"key {self.kid!r} speaks for {self.party!r}, not {party!r}")
        return PublicKeyEntry(self.kid, self.key, self.roles, party)

    def jwk(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "x": b64u(self.raw())}
        if self.roles:
            out["roles"] = list(self.roles)
        if self.party is not None:
            out["party"] = self.party
        return out

    def raw(self) -> bytes:
        return self._raw


_REMEMBERED = 4096  # verified (key, signature, message) triples a keyring keeps: a few hundred transactions' worth


class Keyring:
    """kid -> public key and the roles it may sign for. Loaded from a JWKS: ``{"keys": [jwk, ...]}``."""

    def __init__(self, entries: Iterable[PublicKeyEntry] = (), *, remember: bool = True) -> None:
        """`remember`: keep a memo of the signatures that verified (see `check_signature`); off where no signature
        is checked twice (`hatp verify` on one thread), since a memo nothing reads only costs its digests."""
        self._by_kid: dict[str, PublicKeyEntry] = {}
        self._verified: dict[bytes, None] = {}  # digests of triples that verified, oldest first
        # how many verified triples the memo holds (older ones are verified again); 0: it keeps none
        self.remembers = _REMEMBERED if remember else 0
        for e in entries:
            self.add(e)

    def check_signature(self, entry: PublicKeyEntry, sig: bytes, message: bytes) -> None:
        """Verify `sig` by `entry`'s key over `message`. Raises InvalidSignature.

        A triple that verified before is not verified again: the coordinator checks each piece of evidence when
        it arrives and once more, with the rest of the record, before it closes it (HATP-REC-17). The memo holds
        the SHA-256 of the exact key, signature and message bytes, so only that same triple is ever skipped."""
        if not self.remembers:
            entry.key.verify(sig, message)
            return
        memo = hashlib.sha256(entry.raw() + len(sig).to_bytes(4, "big") + sig + message).digest()
        if memo in self._verified:
            return
        entry.key.verify(sig, message)
        self._verified[memo] = None
        # Threads verify at once (the gate's, `hatp verify --verify-threads`): evict without a KeyError, and look
        # again when another thread changed the memo between iter() and next() (RuntimeError); a few tries more
        # than the excess, so what a try missed is trimmed on the next (the bound holds).
        excess = len(self._verified) - _REMEMBERED
        for _ in range(excess + 2 if excess > 0 else 0):
            if len(self._verified) <= _REMEMBERED:
                break
            try:
                oldest = next(iter(self._verified), None)
            except RuntimeError:
                continue
            if oldest is None:
                break
            self._verified.pop(oldest, None)

    def verify_ahead(self, entry: PublicKeyEntry, sig: bytes, message: bytes) -> bool:
        """Verify a triple ahead of the checker that will meet it (threads may: the memo is thread-safe), and
        remember it when it verifies. Decides nothing: a triple that does not verify is not remembered, so the
        checker verifies it again itself and refuses it there, with its own rule, path and order. Returns whether
        it verified."""
        try:
            self.check_signature(entry, sig, message)
        except InvalidSignature:
            return False
        return True

    def add(self, entry: PublicKeyEntry) -> None:
        """Raises ValueError when another key has this kid, or this key is already bound to another party."""
        old = self._by_kid.get(entry.kid)
        if old is not None and old.raw() != entry.raw():
            raise ValueError(f"two different keys share kid {entry.kid!r}")
        if old is not None and old.party is not None and entry.party is not None and old.party != entry.party:
            raise ValueError(f"key {entry.kid!r} speaks for {old.party!r}, not {entry.party!r}")
        if old is None or entry.party is not None:  # adding a known key again never unbinds it
            self._by_kid[entry.kid] = entry

    def add_signer(self, key: SigningKey, party: str | None = None) -> None:
        """Trust `key`'s public half for its roles; `party`: the URI it speaks for (HATP-SIG-6)."""
        self.add(PublicKeyEntry.from_jwk(key.public_jwk(party)))

    @classmethod
    def from_jwks(cls, doc: Mapping[str, Any]) -> Keyring:
        """Raises ValueError naming the key that is wrong (or a `doc` that is not a JSON object)."""
        keys = doc.get("keys") if isinstance(doc, Mapping) else None
        if not isinstance(keys, list):
            raise ValueError("a keyring is a JSON object with a 'keys' array of JWKs")
        ring = cls()
        for i, jwk in enumerate(keys):
            if not isinstance(jwk, dict):
                raise ValueError(f"keys[{i}] is not a JSON object")
            try:
                ring.add(PublicKeyEntry.from_jwk(jwk))
            except ValueError as exc:
                raise ValueError(f"keys[{i}]: {exc}") from exc
        return ring

    def to_jwks(self) -> dict[str, Any]:
        return {"keys": [e.jwk() for e in self._by_kid.values()]}

    def bound_to(self, party: str) -> Keyring:
        """A copy whose every key is bound to `party` (a participant's own keys, before a coordinator trusts them).

        Raises ValueError when a key is already bound to another party."""
        return Keyring(e.with_party(party) for e in self._by_kid.values())

    def entries(self) -> list[PublicKeyEntry]:
        return list(self._by_kid.values())

    def get(self, kid: str) -> PublicKeyEntry | None:
        return self._by_kid.get(kid)

    def __contains__(self, kid: object) -> bool:
        return kid in self._by_kid

    def __len__(self) -> int:
        return len(self._by_kid)


def check_party(entry: PublicKeyEntry, party: object, path: str = "$", *, required: bool = False) -> None:
    """HATP-SIG-6: a key whose entry names a party signs only as that party. `party` is the party the signed
    object speaks for (a vote's voter, a receipt's participant, an approval's gateway). With `required`, a key
    bound to no party is refused too (fail closed).

    Raises SignatureError HATP-SIG-6 (code KEY_NOT_THE_PARTY)."""
    if entry.party is None and not required:
        return
    if entry.party is None or entry.party != party:
        raise SignatureError(
            "HATP-SIG-6",
            f"key {entry.kid!r} speaks for {entry.party or 'no party'}, not for {party!r}",
            path=path,
            code="KEY_NOT_THE_PARTY",
            fix="sign with the key of the party the object names, and bind each trusted key to its party",
        )


def unsigned(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy of `obj` without its ``signature`` member: what a signature covers, before its canonical
    form (the copy and the pop run in C)."""
    body = dict(obj)
    body.pop("signature", None)
    return body


def signing_bytes(obj: Mapping[str, Any]) -> bytes:
    """The bytes a signature covers: the canonical form of the object without its ``signature`` member."""
    return canonical(unsigned(obj))


def sign_object(obj: Mapping[str, Any], key: SigningKey) -> dict[str, Any]:
    """Return a copy of `obj` (a JSON object) with ``signature: {alg, kid, sig}`` set."""
    body = unsigned(obj)
    return {**body, "signature": {"alg": ALG, "kid": key.kid, "sig": key.sign(canonical(body))}}


def verify_object(obj: Mapping[str, Any], keyring: Keyring, role: str | None = None, path: str = "$") -> str:
    """Verify `obj`'s signature; return the signer's kid.

    Raises SignatureError with rule HATP-SIG-1 (missing or malformed signature), HATP-SIG-2 (unknown kid),
    HATP-SIG-3 (algorithm other than EdDSA), HATP-SIG-4 (the bytes do not match the signature),
    HATP-SIG-5 (the key is not allowed to sign for `role`).
    """
    return _verify(obj, keyring, role, path)


def _verify(obj: Mapping[str, Any], keyring: Keyring, role: str | None, path: str) -> str:
    """verify_object's checks, in their order: the signing bytes computed once the signature's shape, algorithm
    and kid are known good (so an object without a canonical form is refused HATP-CANON-2 after HATP-SIG-1, -3
    and -2)."""
    sig = obj.get("signature")
    spath = f"{path}.signature"
    if not (
        (type(sig) is dict or isinstance(sig, Mapping))
        and isinstance(sig.get("alg"), str)
        and isinstance(sig.get("kid"), str)
        and isinstance(sig.get("sig"), str)
    ):
        raise SignatureError("HATP-SIG-1", "the object carries no signature {alg, kid, sig}", path=spath, fix="sign it")
    try:
        raw_sig = b64u_decode(sig["sig"])
    except ValueError as exc:
        raise SignatureError(
            "HATP-SIG-1",
            "sig is not the unpadded base64url text of its bytes (padding, a character outside the alphabet, or "
            "stray bits in its last character): one signature has one text",
            path=f"{spath}.sig",
            fix="write the signature bytes as unpadded base64url (RFC 4648 section 5), as the signer did",
        ) from exc
    if sig["alg"] != ALG:
        raise SignatureError(
            "HATP-SIG-3", f"algorithm {sig['alg']!r} is not allowed; only {ALG} is", path=f"{spath}.alg"
        )
    entry = keyring.get(sig["kid"])
    if entry is None:
        raise SignatureError(
            "HATP-SIG-2",
            f"kid {sig['kid']!r} is not in the keyring",
            path=f"{spath}.kid",
            fix="add the signer's public key to the keyring if you trust it",
        )
    try:
        signed = signing_bytes(obj)
    except CanonicalError as exc:  # no canonical form, so nothing a signature could cover: refused, not a crash
        raise SignatureError(
            "HATP-CANON-2", f"the signed object has no canonical form: {exc.reason}", path=f"{path}{exc.path[1:]}"
        ) from exc
    try:
        keyring.check_signature(entry, raw_sig, signed)
    except InvalidSignature as exc:
        raise SignatureError(
            "HATP-SIG-4",
            f"signature by {entry.kid!r} does not match the object's bytes: it was altered or forged",
            path=f"{spath}.sig",
        ) from exc
    if role is not None:
        check_role(entry, role, path)
    return entry.kid


def check_role(entry: PublicKeyEntry, role: str, path: str = "$") -> None:
    """HATP-SIG-5: `entry`'s key may sign as `role`; `path` is the signed object's. The last of verify_object's
    checks, for a caller that verified the signature itself earlier in the same check.

    Raises SignatureError HATP-SIG-5."""
    if role not in entry.roles:
        raise SignatureError(
            "HATP-SIG-5",
            f"key {entry.kid!r} may sign as {list(entry.roles) or 'nothing'}, not as {role!r}",
            path=f"{path}.signature.kid",
            fix=f"sign with a key whose keyring entry lists the role {role!r}",
        )

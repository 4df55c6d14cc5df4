"""Ed25519 JWKs, keyrings and signatures: each refusal has its own rule (HATP-SIG-1..5, HATP-KEY-1)."""

from __future__ import annotations

import base64
import binascii

import pytest
from cryptography.exceptions import InvalidSignature
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.signing.keys import (
    Keyring,
    PublicKeyEntry,
    SignatureError,
    SigningKey,
    b64u,
    b64u_decode,
    check_party,
    sign_object,
    verify_object,
)


@pytest.fixture
def signer() -> SigningKey:
    return SigningKey.generate(["participant"])


@pytest.fixture
def ring(signer: SigningKey) -> Keyring:
    r = Keyring()
    r.add_signer(signer)
    return r


def refusal(obj: dict[str, object], ring: Keyring, role: str | None = "participant") -> SignatureError:
    with pytest.raises(SignatureError) as err:
        verify_object(obj, ring, role)
    return err.value


def test_a_signed_object_verifies_and_names_its_signer(signer: SigningKey, ring: Keyring) -> None:
    obj = sign_object({"type": "hatp.vote", "decision": "yes"}, signer)
    assert obj["signature"]["alg"] == "EdDSA"
    assert verify_object(obj, ring, "participant") == signer.kid


def test_an_unsigned_object_is_refused_as_unsigned_HATP_SIG_1(ring: Keyring) -> None:
    err = refusal({"decision": "yes"}, ring)
    assert err.rule == "HATP-SIG-1"
    err = refusal({"decision": "yes", "signature": {"alg": "EdDSA", "kid": 3, "sig": "x"}}, ring)
    assert err.rule == "HATP-SIG-1"


def test_a_signature_by_an_unknown_kid_is_refused_HATP_SIG_2(ring: Keyring) -> None:
    stranger = SigningKey.generate(["participant"])
    err = refusal(sign_object({"decision": "yes"}, stranger), ring)
    assert err.rule == "HATP-SIG-2"
    assert stranger.kid in err.reason


def test_a_signature_with_another_algorithm_is_refused_HATP_SIG_3(signer: SigningKey, ring: Keyring) -> None:
    obj = sign_object({"decision": "yes"}, signer)
    obj["signature"] = {**obj["signature"], "alg": "none"}
    err = refusal(obj, ring)
    assert err.rule == "HATP-SIG-3"
    assert err.path == "$.signature.alg"


def test_one_changed_byte_breaks_the_signature_HATP_SIG_4(signer: SigningKey, ring: Keyring) -> None:
    obj = sign_object({"decision": "yes", "amount": "100.00"}, signer)
    err = refusal({**obj, "amount": "100.01"}, ring)
    assert err.rule == "HATP-SIG-4"
    sig = bytearray(b64u_decode(obj["signature"]["sig"]))
    sig[0] ^= 1
    err = refusal({**obj, "signature": {**obj["signature"], "sig": b64u(bytes(sig))}}, ring)
    assert err.rule == "HATP-SIG-4"


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def other_texts(text: str) -> list[str]:
    """Texts a lenient base64url decoder reads as the same bytes as `text`: stray bits set in the last character
    (64 bytes leave 4 of its 6 bits unused), characters outside the alphabet (dropped), padding."""
    last = _ALPHABET.index(text[-1])
    return [text[:-1] + _ALPHABET[last ^ 1], text[:20] + "!!!!" + text[20:], text + "==", text[:20] + "\n" + text[20:]]


def test_one_signature_has_one_text_HATP_SIG_1(signer: SigningKey, ring: Keyring) -> None:
    """The attack: a signature's text rewritten so that it decodes to the same bytes still verified, so a signed
    object (a record's closing event, whose digest nothing else signs) could change its digest and still verify."""
    obj = sign_object({"decision": "yes", "amount": "100.00"}, signer)
    text = obj["signature"]["sig"]
    for other in other_texts(text):
        err = refusal({**obj, "signature": {**obj["signature"], "sig": other}}, ring)
        assert err.rule == "HATP-SIG-1", other
        assert err.path == "$.signature.sig"
        with pytest.raises(ValueError):
            b64u_decode(other)
    assert b64u_decode(text) == b64u_decode(b64u(b64u_decode(text)))
    assert verify_object(obj, ring, "participant") == signer.kid


def _lenient_then_compared(text: str) -> bytes | None:
    """The oracle: the standard library's lenient decoder (it drops characters outside the alphabet), then the
    text its bytes have compared with the text given. None where a base64url text of one byte string is refused."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None
    return raw if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") == text else None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=96))
def test_b64u_writes_and_reads_back_every_byte_string_as_the_standard_library_does_HATP_SIG_1(data: bytes) -> None:
    text = b64u(data)
    assert text == base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
    assert b64u_decode(text) == data


@settings(max_examples=600, deadline=None)
@given(st.one_of(st.text(alphabet=_ALPHABET, max_size=90), st.text(alphabet=_ALPHABET + "+/=!. \n\u00e9", max_size=90)))
def test_b64u_decode_reads_a_text_only_when_it_is_the_one_its_bytes_have_HATP_SIG_1(text: str) -> None:
    """Any text: read only where it is exactly what b64u writes for the bytes it decodes to (stray bits in the last
    character, padding, the standard alphabet's + and /, anything outside the alphabet: refused), as the oracle."""
    want = _lenient_then_compared(text)
    if want is None:
        with pytest.raises(ValueError):
            b64u_decode(text)
    else:
        assert b64u_decode(text) == want


def test_a_key_signing_outside_its_roles_is_refused_HATP_SIG_5(signer: SigningKey, ring: Keyring) -> None:
    obj = sign_object({"event": "txn.begin"}, signer)
    err = refusal(obj, ring, role="coordinator")
    assert err.rule == "HATP-SIG-5"
    assert "coordinator" in err.reason


def test_jwks_round_trip_and_kid_collisions_are_refused_HATP_KEY_1(signer: SigningKey) -> None:
    ring = Keyring.from_jwks({"keys": [signer.public_jwk()]})
    assert signer.kid in ring
    assert Keyring.from_jwks(ring.to_jwks()).get(signer.kid) is not None
    other = SigningKey.generate(["participant"], kid=signer.kid)
    with pytest.raises(ValueError, match="share kid"):
        Keyring.from_jwks({"keys": [signer.public_jwk(), other.public_jwk()]})
    loaded = SigningKey.from_jwk(signer.private_jwk())
    assert loaded.public_raw() == signer.public_raw()
    tampered = {**signer.private_jwk(), "x": other.public_jwk()["x"]}
    with pytest.raises(ValueError, match="does not match"):
        SigningKey.from_jwk(tampered)


@pytest.mark.parametrize(
    "jwk",
    [
        {"kty": "RSA", "crv": "Ed25519", "kid": "k", "x": "AAAA"},
        {"kty": "OKP", "crv": "Ed25519", "x": "AAAA"},
        {"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": "not base64!"},
        {"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": b64u(b"\0" * 32), "roles": ["king"]},
    ],
)
def test_malformed_keys_are_refused_with_a_reason(jwk: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"keys\[0\]"):
        Keyring.from_jwks({"keys": [jwk]})


HOTEL = "mcp://hotel.example/hatp"
AIRLINE = "mcp://airline.example/hatp"


def test_HATP_SIG_6_a_keyring_entry_names_its_party_and_keeps_it_through_a_jwks(signer: SigningKey) -> None:
    ring = Keyring()
    ring.add_signer(signer, HOTEL)
    assert signer.public_jwk(HOTEL)["party"] == HOTEL and "party" not in signer.public_jwk()
    again = Keyring.from_jwks(ring.to_jwks())
    assert again.get(signer.kid).party == HOTEL  # type: ignore[union-attr]
    ring.add_signer(signer)  # adding the key again without a party never unbinds it
    assert ring.get(signer.kid).party == HOTEL  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="speaks for"):
        ring.add_signer(signer, AIRLINE)
    with pytest.raises(ValueError, match="party"):
        Keyring.from_jwks({"keys": [{**signer.public_jwk(), "party": ""}]})
    assert [e.party for e in Keyring([again.get(signer.kid)]).bound_to(HOTEL).entries()] == [HOTEL]  # type: ignore[list-item]
    with pytest.raises(ValueError):
        again.bound_to(AIRLINE)


def test_HATP_SIG_6_a_bound_key_signs_only_as_its_party_and_an_unbound_one_only_where_allowed(
    signer: SigningKey,
) -> None:
    bound = Keyring()
    bound.add_signer(signer, HOTEL)
    entry = bound.get(signer.kid)
    assert entry is not None
    check_party(entry, HOTEL)
    with pytest.raises(SignatureError) as err:
        check_party(entry, AIRLINE, "$.vote.voter")
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-SIG-6", "KEY_NOT_THE_PARTY", "$.vote.voter")
    free = Keyring()
    free.add_signer(signer)
    unbound = free.get(signer.kid)
    assert unbound is not None
    check_party(unbound, AIRLINE)  # no party named: roles alone decide
    with pytest.raises(SignatureError) as closed:
        check_party(unbound, AIRLINE, required=True)  # where whose key signed matters, fail closed
    assert closed.value.rule == "HATP-SIG-6"


def test_a_signature_verified_once_is_remembered_only_for_its_exact_bytes_HATP_SIG_4() -> None:
    """The coordinator verifies evidence on arrival and again before it closes the record (HATP-REC-17): the
    second check may skip the arithmetic, never the comparison of the bytes."""
    from hatp_mcp.core.signing.keys import Keyring, SignatureError, SigningKey, sign_object, verify_object

    key = SigningKey.generate(["participant"], kid="p-1")
    ring = Keyring()
    ring.add_signer(key)
    signed = sign_object({"type": "hatp.vote", "decision": "yes"}, key)
    assert verify_object(signed, ring) == "p-1"
    assert verify_object(signed, ring) == "p-1"  # remembered
    for altered in ({**signed, "decision": "no"}, {**signed, "extra": 1}):
        with pytest.raises(SignatureError) as err:
            verify_object(altered, ring)
        assert err.value.rule == "HATP-SIG-4"
    other = SigningKey.generate(["participant"], kid="p-1")  # the same kid, another key, in another keyring
    ring2 = Keyring()
    ring2.add_signer(other)
    with pytest.raises(SignatureError):
        verify_object(signed, ring2)


def test_a_keyring_that_does_not_remember_verifies_every_time_and_keeps_nothing_HATP_SIG_4() -> None:
    """`hatp verify` on one thread meets each signature once: its keyring keeps no memo, so each check verifies."""
    from hatp_mcp.cli.verify_cmd import checking_keyring
    from hatp_mcp.core.signing.keys import Keyring, SigningKey, b64u_decode

    key = SigningKey.generate(["participant"], kid="p-1")
    remembering = Keyring()
    remembering.add_signer(key)
    ring = checking_keyring(remembering, 1)
    assert not ring.remembers and checking_keyring(remembering, 2).remembers
    assert ring.entries() == remembering.entries()
    entry = ring.entries()[0]
    message = b"a vote"
    sig = b64u_decode(key.sign(message))
    for _ in range(2):
        ring.check_signature(entry, sig, message)
        with pytest.raises(InvalidSignature):
            ring.check_signature(entry, sig, message + b"!")
    assert ring._verified == {}  # nothing written that nothing would read
    remembering.check_signature(entry, sig, message)
    assert len(remembering._verified) == 1


def _full_memo_of_two(
    signer: SigningKey, ring: Keyring, monkeypatch: pytest.MonkeyPatch
) -> tuple[PublicKeyEntry, list[bytes]]:
    """A memo that keeps 2 triples, full after 3 verified; the 4 messages, the last not yet verified."""
    import hatp_mcp.core.signing.keys as keys

    monkeypatch.setattr(keys, "_REMEMBERED", 2)
    entry = ring.entries()[0]
    messages = [f"message {i}".encode() for i in range(4)]
    for m in messages[:3]:
        ring.check_signature(entry, b64u_decode(signer.sign(m)), m)  # memo full: 2 kept
    return entry, messages


class _EvictedMeanwhile(dict[bytes, None]):
    """A keyring memo where another thread evicts the oldest entry at the moment this one looks it up: the
    interleaving two verifying threads (the gate's worker and its verifier) can meet when the memo is full."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        keys = list(super().__iter__())
        if keys:
            super().__delitem__(keys[0])  # the other thread's eviction, between this lookup and this delete
        return iter(keys)


def test_a_full_memo_evicted_by_two_threads_at_once_never_fails_a_good_signature(
    signer: SigningKey, ring: Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry, messages = _full_memo_of_two(signer, ring, monkeypatch)
    ring._verified = _EvictedMeanwhile(ring._verified)
    ring.check_signature(entry, b64u_decode(signer.sign(messages[3])), messages[3])  # a good signature: no KeyError
    assert len(ring._verified) <= 2


class _GrownMeanwhile(dict[bytes, None]):
    """A keyring memo where another thread remembers a triple right after this one starts looking for the oldest
    entry to evict (between iter() and next()): a dict iterator then raises RuntimeError (it changed size)."""

    grown = False

    def __iter__(self):  # type: ignore[no-untyped-def]
        it = super().__iter__()
        if not self.grown:  # (once: the other thread remembers one triple)
            self.grown = True
            self[b"the other thread's triple"] = None
        return it


def test_a_full_memo_grown_by_another_thread_while_evicting_never_fails_a_good_signature(
    signer: SigningKey, ring: Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry, messages = _full_memo_of_two(signer, ring, monkeypatch)
    memo = _GrownMeanwhile(ring._verified)
    ring._verified = memo
    ring.check_signature(entry, b64u_decode(signer.sign(messages[3])), messages[3])  # a good one: no RuntimeError
    assert memo.grown and len(memo) == 2  # the other thread's triple came in, and the memo's bound still holds

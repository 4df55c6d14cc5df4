"""The hash-chained Transaction Record: every kind of tampering is reported with its exact rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import MAX_SAFE_INTEGER, digest, digest_bytes
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SigningKey, sign_object, verify_object
from hatp_mcp.core.txn.record import Problem, RecordChain, signatures_ahead, verify_record
from tests.factories import signed_trip_record, trip_plan_json


@pytest.fixture
def made() -> tuple[dict[str, Any], Keyring, dict[str, SigningKey]]:
    return signed_trip_record()


def rules(problems: list[Problem]) -> set[tuple[int, str]]:
    return {(p.index, p.rule) for p in problems}


def test_an_untouched_record_verifies(made: tuple[dict[str, Any], Keyring, dict[str, SigningKey]]) -> None:
    record, ring, _ = made
    assert verify_record(record, ring) == []


def test_a_closing_event_whose_signature_text_was_rewritten_is_refused_HATP_SIG_1(made: Any) -> None:
    """The attack: the last event's digest is signed by no later event, so rewriting its signature's text into
    another that a lenient decoder reads as the same bytes (a stray bit in the last character) changed the
    record's head digest while every check passed."""
    record, ring, _ = made
    close = record["events"][-1]
    text = close["signature"]["sig"]
    last = _ALPHABET.index(text[-1])
    close["signature"] = {**close["signature"], "sig": text[:-1] + _ALPHABET[last ^ 1]}
    assert digest(close) != digest({**close, "signature": {**close["signature"], "sig": text}})
    assert rules(verify_record(record, ring)) == {(len(record["events"]) - 1, "HATP-SIG-1")}


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def test_dropping_an_event_breaks_sequence_and_chain_HATP_REC_1_HATP_REC_2(made: Any) -> None:
    record, ring, _ = made
    del record["events"][2]
    found = rules(verify_record(record, ring))
    assert (2, "HATP-REC-1") in found and (2, "HATP-REC-2") in found


def test_swapping_two_events_is_reported_at_both_places(made: Any) -> None:
    record, ring, _ = made
    ev = record["events"]
    ev[1], ev[2] = ev[2], ev[1]
    found = rules(verify_record(record, ring))
    assert {(1, "HATP-REC-1"), (2, "HATP-REC-1"), (1, "HATP-REC-2"), (2, "HATP-REC-2")} <= found


def test_editing_an_event_breaks_its_signature_and_the_next_link_HATP_REC_3(made: Any) -> None:
    record, ring, _ = made
    record["events"][11]["body"]["decision"] = "abort"
    found = rules(verify_record(record, ring))
    assert (11, "HATP-SIG-4") in found and (12, "HATP-REC-2") in found
    # HATP-REC-3: a coordinator event re-signed by a participant key is refused for its role
    record2, ring2, keys = signed_trip_record()
    record2["events"][11] = sign_object(record2["events"][11], keys["participant"])
    assert (11, "HATP-SIG-5") in rules(verify_record(record2, ring2))


def test_an_event_re_signed_with_a_foreign_key_is_refused(made: Any) -> None:
    record, ring, _ = made
    foreign = SigningKey.generate(["coordinator"], kid="mallory")
    record["events"][11]["body"]["decision"] = "abort"
    record["events"][11] = sign_object(record["events"][11], foreign)
    problems = verify_record(record, ring)
    assert (11, "HATP-SIG-2") in rules(problems)
    assert "mallory" in next(p.reason for p in problems if p.rule == "HATP-SIG-2")


def test_splicing_events_from_another_record_is_refused_HATP_REC_4_HATP_REC_5(made: Any) -> None:
    record, ring, _keys = made
    other, _, _ = signed_trip_record("txn-other-0002")
    record["events"][2] = other["events"][2]
    found = rules(verify_record(record, ring))
    assert (2, "HATP-REC-5") in found and (2, "HATP-REC-4") in found and (2, "HATP-REC-2") in found


def test_truncating_the_tail_is_detected_because_the_close_anchors_the_head_HATP_REC_6(made: Any) -> None:
    record, ring, _ = made
    del record["events"][-2:]
    found = rules(verify_record(record, ring))
    assert (len(record["events"]) - 1, "HATP-REC-6") in found
    assert verify_record(record, ring, require_closed=False) == []  # an open record is all anyone can say


def test_events_after_the_close_or_a_wrong_count_are_refused_HATP_REC_6(made: Any) -> None:
    record, ring, keys = made
    close = copy.deepcopy(record["events"][-1])
    close["body"]["eventCount"] = 3
    record["events"][-1] = sign_object(close, keys["coordinator"])
    assert (16, "HATP-REC-6") in rules(verify_record(record, ring))


class _CountingKeyring(Keyring):
    """A keyring that counts the signatures handed to it for checking (memo hits included)."""

    checked = 0

    def check_signature(self, entry: PublicKeyEntry, sig: bytes, message: bytes) -> None:
        self.checked += 1
        super().check_signature(entry, sig, message)


@pytest.mark.parametrize("outcome", ["COMMITTED", "ABORTED"])
def test_each_signature_in_a_record_is_checked_once(outcome: str) -> None:
    """The chain pass verifies every piece of evidence, and the outcome's checks (HATP-REC-11..16) are told which
    signatures it verified instead of checking them again: `hatp verify` checks each signature in the record once."""
    record, ring, _ = signed_trip_record(outcome=outcome)
    counting = _CountingKeyring(ring.entries())
    problems = verify_record(record, counting)
    assert outcome == "ABORTED" or problems == []
    assert counting.checked == len(signatures_ahead(record, ring)) == 31


def test_a_vote_whose_signature_verified_on_the_chain_pass_still_needs_the_participant_role_HATP_SIG_5(
    made: Any,
) -> None:
    """The outcome's checks take the chain pass's word that a signature verified, never that its key may sign as
    what the outcome needs: the airline's vote, re-signed by a key bound to the airline that may sign only as a
    gateway, passes the chain pass (a vote may be a gateway's) and does not count as the seat's vote."""
    record, ring, keys = made
    impostor = SigningKey.generate(["gateway"], kid="airline-as-gateway")
    ring.add_signer(impostor, "mcp://airline.example/hatp")
    vote = record["events"][1]
    assert vote["evidence"]["type"] == "hatp.vote" and vote["evidence"]["branchId"] == "seat"
    vote["evidence"] = sign_object(vote["evidence"], impostor)
    record["events"][1] = sign_object(vote, keys["coordinator"])
    problems = verify_record(record, ring)
    assert not [p for p in problems if p.index == 1]  # the chain pass: signature, vote roles and party all hold
    (refused,) = [p for p in problems if p.rule == "HATP-REC-11"]
    assert refused.index == 11 and "seat's vote at event 1 does not count" in refused.reason
    assert "HATP-SIG-5" in refused.reason and "not as 'participant'" in refused.reason


def test_a_vote_whose_signature_fails_on_the_chain_pass_is_not_counted_by_the_outcome_HATP_REC_11(
    made: Any,
) -> None:
    """The attack on the hand-over: a forged vote (its signature bent) is never passed on as verified, so the
    outcome's checks verify it themselves and refuse it; the commit stands unjustified. Checking changes nothing."""
    record, ring, keys = made
    vote = record["events"][1]
    sig = vote["evidence"]["signature"]["sig"]
    bent = _ALPHABET[_ALPHABET.index(sig[0]) ^ 1] + sig[1:]
    vote["evidence"] = {**vote["evidence"], "signature": {**vote["evidence"]["signature"], "sig": bent}}
    record["events"][1] = sign_object(vote, keys["coordinator"])
    kept = copy.deepcopy(record)
    problems = verify_record(record, ring)
    assert (1, "HATP-SIG-4") in rules(problems)
    (refused,) = [p for p in problems if p.rule == "HATP-REC-11"]
    assert refused.index == 11 and "seat's vote at event 1 does not count" in refused.reason
    assert "HATP-SIG-4" in refused.reason
    assert record == kept


def test_the_first_event_must_be_the_begin_HATP_REC_7() -> None:
    plan = Plan.model_validate(trip_plan_json())
    key = SigningKey.generate(["coordinator"])
    ring = Keyring()
    ring.add_signer(key)
    chain = RecordChain(plan, key, "coordinator")
    with pytest.raises(ValueError, match=r"first event must be 'txn\.begin'"):
        chain.append("vote", "2026-11-29T10:00:00Z")
    chain.append("txn.begin", "2026-11-29T10:00:00Z")
    chain.close("2026-11-29T10:00:01Z", "ABORTED")
    record = chain.record()
    record["events"][0]["event"] = "vote"
    record["events"][0] = sign_object(record["events"][0], key)
    assert (0, "HATP-REC-7") in rules(verify_record(record, ring))


def test_evidence_signed_by_the_wrong_role_is_refused_HATP_REC_8(made: Any) -> None:
    record, ring, keys = made
    # the airline's key signs an approval-style vote as if it were the gateway: allowed for votes (participant),
    # but a receipt signed by the gateway key is not a participant's receipt.
    ev = record["events"][4]
    ev["evidence"] = sign_object(ev["evidence"], keys["gateway"])
    record["events"][4] = sign_object(ev, keys["coordinator"])
    problems = verify_record(record, ring)
    assert (4, "HATP-SIG-5") in rules(problems)
    ev["evidence"]["type"] = "hatp.mystery"
    record["events"][4] = sign_object(ev, keys["coordinator"])
    assert (4, "HATP-REC-8") in rules(verify_record(record, ring))


def test_evidence_about_another_plan_is_refused_HATP_DIG_2(made: Any) -> None:
    record, ring, keys = made
    ev = record["events"][1]
    ev["evidence"]["planDigest"] = "sha256:" + "0" * 64
    ev["evidence"] = sign_object(ev["evidence"], keys["participant"])
    record["events"][1] = sign_object(ev, keys["coordinator"])
    found = rules(verify_record(record, ring))
    assert (1, "HATP-REC-4") in found


def test_time_never_goes_backwards_HATP_REC_9(made: Any) -> None:
    record, ring, keys = made
    ev = record["events"][2]
    ev["at"] = "2026-11-29T09:00:00Z"
    record["events"][2] = sign_object(ev, keys["coordinator"])
    assert (2, "HATP-REC-9") in rules(verify_record(record, ring))


def test_a_record_whose_plan_was_edited_no_longer_matches_its_digest(made: Any) -> None:
    record, ring, _ = made
    record["plan"]["branches"][3]["amount"]["value"] = "10.00"
    found = rules(verify_record(record, ring))
    assert (-1, "HATP-REC-4") in found


def test_nothing_may_be_appended_after_the_close() -> None:
    plan = Plan.model_validate(trip_plan_json())
    chain = RecordChain(plan, SigningKey.generate(["coordinator"]), "coordinator")
    chain.append("txn.begin", "2026-11-29T10:00:00Z")
    chain.close("2026-11-29T10:00:01Z", "ABORTED")
    with pytest.raises(ValueError, match="closed"):
        chain.append("vote", "2026-11-29T10:00:02Z")


@pytest.mark.parametrize(
    ("event", "at", "body", "match"),
    [
        ("", "2026-11-29T10:00:00Z", None, "event name"),
        ("x" * 65, "2026-11-29T10:00:00Z", None, "event name"),
        ("vote", "2026-11-29 10:00", None, "RFC 3339"),
        ("vote", "2026-11-29T10:00:00+01:00", None, "RFC 3339"),
        ("vote", "2026-11-29T10:00:00Z", ["not", "an", "object"], "body must be a JSON object"),
        ("vote", "2026-11-29T10:00:00Z", {1: "int key"}, "body must be a JSON object"),
    ],
)
def test_a_malformed_append_is_refused_and_leaves_the_chain_unchanged(
    event: str, at: str, body: Any, match: str
) -> None:
    chain = RecordChain(Plan.model_validate(trip_plan_json()), SigningKey.generate(["coordinator"]), "coordinator")
    begun = chain.append("txn.begin", "2026-11-29T10:00:00Z")
    with pytest.raises(ValueError, match=match):
        chain.append(event, at, body)
    assert chain.events == [begun] and chain.head is not None
    with pytest.raises(ValueError, match="evidence must be a JSON object"):
        chain.append("vote", "2026-11-29T10:00:01Z", evidence="signed?")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="author"):
        chain.append("vote", "2026-11-29T10:00:01Z", author="x" * 501)
    assert len(chain.events) == 1


def test_a_chain_given_the_plan_digest_builds_the_same_record_and_refuses_a_non_digest() -> None:
    plan = Plan.model_validate(trip_plan_json())
    key = SigningKey.generate(["coordinator"])
    ring = Keyring()
    ring.add_signer(key)
    chain = RecordChain(plan, key, "coordinator", plan_digest=plan.digest())
    chain.append("txn.begin", "2026-11-29T10:00:00Z", {"mode": "sync"})
    chain.append("abort.requested", "2026-11-29T10:00:01Z", {"reason": "changed plans", "by": "agent://acme.com/b"})
    chain.append("decision", "2026-11-29T10:00:01Z", {"decision": "abort", "reason": "ABORT_REQUESTED: changed plans"})
    chain.close("2026-11-29T10:00:01Z", "ABORTED")
    assert chain.record()["planDigest"] == plan.digest()
    assert verify_record(chain.record(), ring) == []
    with pytest.raises(ValueError, match="not a sha256"):
        RecordChain(plan, key, "coordinator", plan_digest="abc")


def test_HATP_SIG_6_evidence_signed_by_one_partys_key_in_anothers_name_is_reported_offline(made: Any) -> None:
    record, ring, keys = made
    hotel = keys["hotel"]  # bound to mcp://hotel.example/hatp
    ev = record["events"][1]  # the airline's vote, naming voter mcp://airline.example/hatp
    assert ev["evidence"]["voter"] == "mcp://airline.example/hatp"
    ev["evidence"] = sign_object(ev["evidence"], hotel)  # the hotel's own valid key, in the airline's name
    record["events"][1] = sign_object(ev, keys["coordinator"])
    problems = verify_record(record, ring)
    assert [(p.index, p.rule) for p in problems if p.rule.startswith("HATP-SIG")] == [(1, "HATP-SIG-6")]
    assert "hotel.example" in problems[0].reason or any("hotel.example" in p.reason for p in problems)
    unbound = Keyring(e if e.kid != "hotel-1" else PublicKeyEntry(e.kid, e.key, e.roles) for e in ring.entries())
    assert not [p for p in verify_record(record, unbound) if p.rule == "HATP-SIG-6"]  # offline: only bound keys


def test_HATP_SIG_6_a_gateway_vote_naming_another_gateway_is_reported(made: Any) -> None:
    record, ring, keys = made
    ev = record["events"][9]  # the gateway's vote
    ev["evidence"]["voter"] = "gateway://other.example"
    ev["evidence"] = sign_object(ev["evidence"], keys["gateway"])
    record["events"][9] = sign_object(ev, keys["coordinator"])
    assert (9, "HATP-SIG-6") in rules(verify_record(record, ring))


_PLAN = Plan.model_validate(trip_plan_json())
_leaf = st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER) | st.text()
_json = st.recursive(
    _leaf, lambda i: st.lists(i, max_size=4) | st.dictionaries(st.text(), i, max_size=4), max_leaves=16
)


@settings(max_examples=150, deadline=None)
@given(
    st.text(min_size=1, max_size=40),  # the signer's kid: anything, escapes and non-BMP characters included
    st.lists(
        st.tuples(
            st.dictionaries(st.text(), _json, max_size=4), st.none() | st.dictionaries(st.text(), _json, max_size=4)
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_the_chain_digests_each_signed_event_exactly_as_canonicalizing_it_again_would(
    kid: str, steps: list[tuple[dict[str, Any], dict[str, Any] | None]]
) -> None:
    """RecordChain digests the signed event from the bytes it signed (the signature member put in before txnId and
    type): the digest, the link the next event names and the signature must be those of the event canonicalized
    whole and signed by sign_object, byte for byte (rfc8785 as the outside oracle)."""
    key = SigningKey.generate(["coordinator"], kid=kid)
    chain = RecordChain(_PLAN, key, "coordinator://c")
    chain.append("txn.begin", "2026-11-29T10:00:00Z")
    for body, evidence in steps:
        signed = chain.append("note", "2026-11-29T10:00:01Z", body, evidence)
        assert chain.head == digest(signed) == digest_bytes(rfc8785.dumps(signed))
        assert signed == sign_object({k: v for k, v in signed.items() if k != "signature"}, key)
    ring = Keyring()
    ring.add_signer(key)
    assert chain.events[1]["prev"] == digest(chain.events[0])
    assert all(e.get("prev") == digest(p) for p, e in zip(chain.events, chain.events[1:], strict=False))
    # the chain links and the coordinator's signatures hold (the arbitrary evidence is not evidence, HATP-REC-8)
    found = {p.rule for p in verify_record(chain.record(), ring, require_closed=False)}
    assert not found & {"HATP-REC-1", "HATP-REC-2", "HATP-REC-3", "HATP-SIG-4"}
    assert all(verify_object(e, ring, "coordinator") == key.kid for e in chain.events)


# RecordChain.head_at builds its head without validation inside the model's bounds: the same head, the same wire
# form and, outside the bounds, the same refusal as RecordHead itself (the validating constructor is the oracle).
@given(
    seq=st.one_of(st.integers(min_value=-3, max_value=1_000_003), st.sampled_from([True, False])),
    event_digest=st.one_of(
        st.text(alphabet="0123456789abcdef", min_size=63, max_size=65).map(lambda h: "sha256:" + h),
        st.text(max_size=12),
        st.sampled_from(["sha256:" + "A" * 64, "SHA256:" + "a" * 64, "sha256:" + "a" * 64 + "\n"]),
    ),
)
def test_head_built_without_validation_is_the_validated_head(seq: int, event_digest: str) -> None:
    from hatp_mcp.core.model.evidence import RecordHead
    from hatp_mcp.core.txn.record import _head

    try:
        want = RecordHead(seq=seq, event_digest=event_digest)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            _head(seq, event_digest)
        assert got.value.errors(include_url=False) == exc.errors(include_url=False)
        return
    head = _head(seq, event_digest)
    assert head == want
    assert head.wire() == want.wire()
    assert type(head.seq) is type(want.seq)

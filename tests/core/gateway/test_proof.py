"""Human decision proofs: a decision counts only when the person it names signed exactly it, with the ed25519 key on
their Directory-signed card, recently, once. Every planted violation is refused with its rule and leaves the ask as
it was; an Approval's decisions carry the proofs, and an offline verifier checks them against the cards."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.gateway import proof as proof_module
from hatp_mcp.core.gateway.ask_evidence import build_approval, build_vote
from hatp_mcp.core.gateway.machine import AskState, open_approval, state_of
from hatp_mcp.core.gateway.proof import (
    HumanKeys,
    apply_proof,
    ask_id_of,
    check_decision_proofs,
    subject_digest,
    verify_proof,
)
from hatp_mcp.core.model.card import CardKey
from hatp_mcp.core.model.evidence import Approval, HumanDecisionProof
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.signing.keys import SigningKey, b64u
from hatp_mcp.core.signing.models import sign_model
from hatp_mcp.errors import HatpError
from tests.acme_org import GATEWAY_ID, directory, gateway_key, h, human_key, human_keys, plan, proof

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def opened() -> AskRecord:
    return open_approval(plan(), "finance", directory(), gateway=GATEWAY_ID, now=NOW)


def refused(rec: AskRecord, raw: Any, rule: str, *, now: datetime = NOW, used: bool = False) -> HatpError:
    with pytest.raises(HatpError) as err:
        apply_proof(rec, raw, humans=human_keys(), now=now, nonce_used=used)
    assert err.value.rule == rule, err.value
    assert err.value.code == "DECISION_NOT_PROVEN"
    assert state_of(rec) is AskState.PENDING and not rec.decisions  # the ask is as it was
    return err.value


def approved_by(*names: str) -> tuple[AskRecord, Approval]:
    rec = opened()
    for name in names:
        rec, _ = apply_proof(rec, proof(rec.ask, name, "approve", NOW), humans=human_keys(), now=NOW, nonce_used=False)
    approval = build_approval(rec, GATEWAY_ID, "nonce-0123456789abcdef", NOW)
    assert approval is not None
    return rec, approval


def test_every_person_of_the_fixture_org_has_an_ed25519_key_on_their_card() -> None:
    keys = human_keys()
    for card in directory().cards():
        ring = keys.keyring_for(card.id)
        assert ring is not None and len(ring) == 1
        name = card.id.rsplit("/", 1)[1]
        assert ring.get(human_key(name).kid) is not None


def test_a_card_key_of_type_ed25519_must_be_a_32_byte_public_key() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        CardKey(type="ed25519", id="k", public_key="not-a-key")


def test_a_signed_approval_by_an_asked_person_is_applied_and_kept_with_the_decision() -> None:
    rec = opened()
    raw = proof(rec.ask, "bob", "approve", NOW)
    after, got = apply_proof(rec, raw, humans=human_keys(), now=NOW, nonce_used=False)
    assert got.human == h("bob") and got.subject_digest == plan().digest()
    assert [(d.approver, d.proof) for d in after.decisions] == [(h("bob"), got)]
    assert after.decisions[0].proof is not None and after.decisions[0].proof.wire() == raw


def test_HATP_GW_19_a_decision_without_a_proof_or_an_unsigned_one_never_counts() -> None:
    rec = opened()
    refused(rec, None, "HATP-GW-19")
    unsigned = {k: v for k, v in proof(rec.ask, "bob", "approve", NOW).items() if k != "signature"}
    refused(rec, unsigned, "HATP-GW-19")
    refused(rec, {"human": h("bob"), "decision": "approve"}, "HATP-GW-19")
    refused(rec, {**proof(rec.ask, "bob", "approve", NOW), "value": None}, "HATP-GW-19")  # not in normal form


def test_HATP_GW_20_a_proof_signed_with_another_humans_key_is_refused() -> None:
    rec = opened()
    err = refused(rec, proof(rec.ask, "bob", "approve", NOW, key=human_key("carol")), "HATP-GW-20")
    assert err.path == "$.proof.signature.kid"


def test_HATP_GW_20_a_key_not_on_the_card_or_a_person_without_a_card_is_refused() -> None:
    rec = opened()
    stranger = SigningKey.generate(["approver"])
    refused(rec, proof(rec.ask, "bob", "approve", NOW, key=stranger), "HATP-GW-20")
    refused(rec, proof(rec.ask, "bob", "approve", NOW, human=h("mallory")), "HATP-GW-20")
    passkey_kid = SigningKey(f"{'bob'}-passkey-1", stranger.private, ("approver",))  # the placeholder passkey's id
    refused(rec, proof(rec.ask, "bob", "approve", NOW, key=passkey_kid), "HATP-GW-20")


def test_HATP_GW_21_a_forged_or_altered_proof_is_refused() -> None:
    rec = opened()
    raw = proof(rec.ask, "bob", "approve", NOW)
    refused(rec, {**raw, "decision": "reject"}, "HATP-GW-21")
    forged = SigningKey(human_key("bob").kid, SigningKey.generate().private, ("approver",))
    refused(rec, proof(rec.ask, "bob", "approve", NOW, key=forged), "HATP-GW-21")
    sig = raw["signature"]
    refused(rec, {**raw, "signature": {**sig, "alg": "none"}}, "HATP-GW-21")


def test_HATP_GW_22_a_proof_for_another_ask_is_refused() -> None:
    rec = opened()
    err = refused(rec, proof(rec.ask, "bob", "approve", NOW, ask_id="txn-acme-0001/legal"), "HATP-GW-22")
    assert err.path == "$.proof.askId"


def test_HATP_GW_23_a_proof_about_another_digest_is_refused() -> None:
    rec = opened()
    other = plan(["24000"]).digest()
    err = refused(rec, proof(rec.ask, "bob", "approve", NOW, subject=other), "HATP-GW-23")
    assert err.path == "$.proof.subjectDigest"


def test_HATP_GW_25_a_stale_proof_or_one_from_the_future_is_refused() -> None:
    rec = opened()
    refused(rec, proof(rec.ask, "bob", "approve", NOW - timedelta(minutes=11)), "HATP-GW-25")
    refused(rec, proof(rec.ask, "bob", "approve", NOW + timedelta(minutes=2)), "HATP-GW-25")
    fresh = proof(rec.ask, "bob", "approve", NOW - timedelta(minutes=9))
    assert apply_proof(rec, fresh, humans=human_keys(), now=NOW, nonce_used=False)[0].decisions


def test_HATP_GW_26_a_replayed_nonce_is_refused() -> None:
    rec = opened()
    err = refused(rec, proof(rec.ask, "bob", "approve", NOW), "HATP-GW-26", used=True)
    assert err.path == "$.proof.nonce"


def test_a_question_proof_names_the_asks_digest_and_carries_the_answer() -> None:
    from hatp_mcp.core.gateway.asks import ask_digest, open_question

    rec = open_question(
        ask_id="q-1",
        kind="text",
        address=h("carol"),
        question="Why?",
        directory=directory(),
        gateway=GATEWAY_ID,
        now=NOW,
    )
    assert subject_digest(rec.ask) == ask_digest(rec.ask)
    after, _ = apply_proof(
        rec, proof(rec.ask, "carol", "answer", NOW, value="because"), humans=human_keys(), now=NOW, nonce_used=False
    )
    assert after.answer_value == "because" and after.answered_by == h("carol")
    got = verify_proof(
        proof(rec.ask, "carol", "decline", NOW), ask=rec.ask, humans=human_keys(), now=NOW, nonce_used=False
    )
    assert got.decision == "decline"


def test_an_approval_whose_decisions_carry_valid_proofs_verifies_offline() -> None:
    _, approval = approved_by("bob", "carol")
    assert ask_id_of(approval) == "txn-acme-0001/finance"
    signed = sign_model(approval, gateway_key())
    check_decision_proofs(Approval.from_wire(signed.wire()), human_keys())


def test_HATP_GW_27_an_approval_decision_without_a_proof_is_refused_offline() -> None:
    _, approval = approved_by("bob", "carol")
    bare = approval.model_copy(update={"decisions": [approval.decisions[0].model_copy(update={"proof": None})]})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(bare, human_keys())
    assert err.value.rule == "HATP-GW-27" and err.value.path == "$.decisions[0].proof"


def test_HATP_GW_24_a_proof_of_another_person_or_decision_does_not_prove_the_recorded_one() -> None:
    _, approval = approved_by("bob", "carol")
    d0, d1 = approval.decisions
    swapped = approval.model_copy(update={"decisions": [d0.model_copy(update={"approver": h("frank")}), d1]})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(swapped, human_keys())
    assert err.value.rule == "HATP-GW-24"
    flipped = approval.model_copy(update={"decisions": [d0.model_copy(update={"decision": "reject"}), d1]})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(flipped, human_keys())
    assert err.value.rule == "HATP-GW-24"


def test_offline_a_proof_for_another_ask_digest_or_a_repeated_nonce_is_refused() -> None:
    _, approval = approved_by("bob", "carol")
    other = approval.model_copy(update={"requirement_id": "legal"})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(other, human_keys())
    assert err.value.rule == "HATP-GW-22"
    d0 = approval.decisions[0]
    twice = approval.model_copy(update={"decisions": [d0, d0.model_copy(update={"approver": h("bob")})]})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(twice, human_keys())
    assert err.value.rule == "HATP-GW-26"


def test_offline_a_proof_older_than_the_window_before_the_decision_is_refused() -> None:
    _, approval = approved_by("bob", "carol")
    late = approval.decisions[0].model_copy(update={"decided_at": "2026-11-29T10:11:00Z"})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(approval.model_copy(update={"decisions": [late, approval.decisions[1]]}), human_keys())
    assert err.value.rule == "HATP-GW-25"


def test_keys_listed_on_a_card_count_only_for_that_person() -> None:
    keys = HumanKeys.from_cards(directory().cards())
    bob = keys.keyring_for(h("bob"))
    assert bob is not None and human_key("carol").kid not in bob
    assert b64u(human_key("bob").public_raw()) in {k.public_key for k in directory().card(h("bob")).keys}  # type: ignore[union-attr]


def test_HATP_GW_27_an_answer_carries_its_answerers_proof_and_a_changed_or_missing_one_is_refused() -> None:
    from hatp_mcp.core.gateway.ask_evidence import build_answer
    from hatp_mcp.core.gateway.asks import open_question
    from hatp_mcp.core.gateway.proof import check_answer_proof

    rec = open_question(
        ask_id="q-2",
        kind="text",
        address=h("carol"),
        question="Why?",
        directory=directory(),
        gateway=GATEWAY_ID,
        now=NOW,
    )
    rec, _ = apply_proof(
        rec, proof(rec.ask, "carol", "answer", NOW, value="budget"), humans=human_keys(), now=NOW, nonce_used=False
    )
    answer = build_answer(rec, GATEWAY_ID, "nonce-0123456789abcdef", NOW)
    assert answer is not None and answer.proof is not None and answer.proof.value == "budget"
    check_answer_proof(answer, human_keys())
    with pytest.raises(HatpError) as err:
        check_answer_proof(answer.model_copy(update={"value": "no budget"}), human_keys())
    assert err.value.rule == "HATP-GW-24"
    with pytest.raises(HatpError) as err:
        check_answer_proof(answer.model_copy(update={"proof": None}), human_keys())
    assert err.value.rule == "HATP-GW-27"


def _parsed(raw: object) -> object:
    """What proof._parse makes of `raw`: the proof's and the document's wire forms, or the refusal."""
    try:
        got, doc = proof_module._parse(raw, "$.proof")
    except HatpError as exc:
        return (exc.rule, exc.path, exc.reason, exc.fix)
    return (got.wire(), dict(doc))


def test_HATP_GW_19_an_unsigned_or_altered_copy_of_a_proof_is_refused() -> None:
    rec = opened()
    good = HumanDecisionProof.model_validate(proof(rec.ask, "bob", "approve", NOW))
    unsigned = HumanDecisionProof.model_validate({**good.wire(), "signature": None})
    assert _parsed(unsigned) == _parsed(unsigned.wire()) == _parsed(unsigned.model_copy())
    assert _parsed(unsigned)[:3] == ("HATP-GW-19", "$.proof.signature", "the decision proof is unsigned")  # type: ignore[index]
    # A copy changed without validation is not what validation made: it gets the whole check, and its refusal.
    bad = good.model_copy(update={"nonce": "short"})
    assert _parsed(bad)[:2] == ("HATP-GW-19", "nonce")  # type: ignore[index]  # the whole check, as before
    # In an Approval: the same verdict whether its proofs are the parsed ones or copies that take the whole check.
    _, approval = approved_by("bob", "carol")
    parsed = Approval.model_validate(approval.wire())
    copies = parsed.model_copy(
        update={"decisions": [d.model_copy(update={"proof": d.proof.model_copy()}) for d in parsed.decisions]}  # type: ignore[union-attr]
    )
    check_decision_proofs(parsed, human_keys())
    check_decision_proofs(copies, human_keys())
    forged = [d.model_copy(update={"proof": d.proof.model_copy(update={"nonce": "n" * 24})}) for d in parsed.decisions]  # type: ignore[union-attr]
    with pytest.raises(HatpError) as a:
        check_decision_proofs(parsed.model_copy(update={"decisions": forged}), human_keys())
    assert a.value.rule == "HATP-GW-21"
    altered = approval.wire()
    altered["decisions"][0]["proof"]["nonce"] = "n" * 24  # parsed: still forged
    with pytest.raises(HatpError) as b:
        check_decision_proofs(Approval.model_validate(altered), human_keys())
    assert (b.value.rule, b.value.path, b.value.reason) == (a.value.rule, a.value.path, a.value.reason)


def test_HATP_GW_87_a_rejects_reason_is_signed_by_the_person_and_recorded_as_they_signed_it() -> None:
    rec = opened()
    signed = proof(rec.ask, "bob", "reject", NOW, reason="over the hotel cap")
    rec, _ = apply_proof(rec, signed, humans=human_keys(), now=NOW, nonce_used=False)
    approval = build_approval(rec, GATEWAY_ID, "nonce-0123456789abcdef", NOW)
    assert approval is not None and approval.decisions[0].reason == "over the hotel cap"
    check_decision_proofs(approval, human_keys())
    vote = build_vote(rec, GATEWAY_ID, NOW)
    assert vote.decision == "no" and vote.reason == f"rejected by {h('bob')}: over the hotel cap"  # no card known
    named = build_vote(rec, GATEWAY_ID, NOW, {h("bob"): "Bob Brown"})
    assert named.reason == f"rejected by Bob Brown ({h('bob')}): over the hotel cap"  # HATP-GW-93
    put_words = approval.decisions[0].model_copy(update={"reason": "I trust the agent completely"})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(approval.model_copy(update={"decisions": [put_words]}), human_keys())
    assert (err.value.rule, err.value.path) == ("HATP-GW-87", "$.decisions[0].reason")
    altered = dict(signed, reason="something else")  # the person's words changed after they signed
    refused(opened(), altered, "HATP-GW-21")


# HATP-GW-97: the gateway's refusal of a stale proof is read at once (the time in words and how long ago); an offline
# check's against the recorded decision may become a signed vote's reason, so it says the times without a countdown
def test_HATP_GW_97_a_stale_proof_is_refused_with_the_times_in_words() -> None:
    rec = opened()
    stale = refused(rec, proof(rec.ask, "bob", "approve", NOW - timedelta(minutes=11)), "HATP-GW-25")
    assert stale.reason == (
        "the proof was issued at 2026-11-29 09:49 UTC (11 min ago); only proofs from the last 600 s"
        " (and at most 60 s ahead) count"
    )
    ahead = refused(rec, proof(rec.ask, "bob", "approve", NOW + timedelta(minutes=2)), "HATP-GW-25")
    assert ahead.reason.startswith("the proof was issued at 2026-11-29 10:02 UTC (in 2 min); ")
    _, approval = approved_by("bob", "carol")
    late = approval.decisions[0].model_copy(update={"decided_at": "2026-11-29T10:11:00Z"})
    with pytest.raises(HatpError) as err:
        check_decision_proofs(approval.model_copy(update={"decisions": [late, approval.decisions[1]]}), human_keys())
    assert err.value.reason == (
        "the proof was issued at 2026-11-29 10:00 UTC; only proofs from the 600 s (and at most 60 s ahead) before"
        " the decision recorded at 2026-11-29 10:11 UTC count"
    )

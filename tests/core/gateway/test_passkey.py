"""Passkey decisions checked offline against the Directory-signed card (HATP-GW-67..70), each check broken on
purpose: a reject replayed as approve, a payload changed after signing, another ask or plan, wrong origin, wrong
rpId, no user verification, a counter going backwards, a flipped signature bit, a credential not on the card, a
card re-signed by a key that is not the Directory's, a nonce counted twice, and an Ed25519-only approve where the
group requires a passkey."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.gateway.passkey import RelyingParty, verify_assertion
from hatp_mcp.core.gateway.proof import HumanKeys, check_decision_proofs
from hatp_mcp.core.gateway.requirement import HumanRequirement, check_humans_meet
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from tests.acme_org import card_doc, h, resigned, well_known
from tests.passkey_authenticator import ORIGIN, RP_ID, SoftAuthenticator

RP = RelyingParty(RP_ID, (ORIGIN,))
ASK = "txn-acme-0001/finance"
DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
AT = "2026-11-29T10:05:00Z"


def enrolled(name: str = "bob") -> tuple[SoftAuthenticator, HumanCard]:
    auth = SoftAuthenticator(h(name))
    doc = resigned(name, keys=[*card_doc(name)["keys"], auth.card_key()])
    card = Directory.load(well_known(), [doc])[0].card(h(name))
    assert card is not None
    return auth, card


def refused(fn: Any) -> HatpError:
    with pytest.raises(HatpError) as info:
        fn()
    return info.value


def test_HATP_GW_68_a_passkey_decision_on_the_signed_card_verifies_and_the_counter_is_returned() -> None:
    auth, card = enrolled()
    a = auth.decide(ASK, DIGEST, "approve", AT)
    count = verify_assertion(a, card, RP, ask_id=ASK, subject_digest=DIGEST, decision="approve", now=parse_ts(AT))
    assert count == 1


def test_HATP_GW_67_a_reject_assertion_replayed_as_an_approve_is_refused_either_way() -> None:
    auth, card = enrolled()
    reject = auth.decide(ASK, DIGEST, "reject", AT)
    as_reject = refused(
        lambda: verify_assertion(reject, card, RP, ask_id=ASK, subject_digest=DIGEST, decision="approve")
    )
    assert (as_reject.rule, as_reject.code) == ("HATP-GW-67", "PASSKEY_WRONG_DECISION")
    relabelled = reject.model_copy(update={"decision": "approve"})  # the payload changed, the signature kept
    changed = refused(lambda: verify_assertion(relabelled, card, RP, ask_id=ASK, subject_digest=DIGEST))
    assert (changed.rule, changed.code, changed.path) == ("HATP-GW-67", "PASSKEY_WRONG_CHALLENGE", "$.clientDataJSON")


def test_HATP_GW_87_a_passkey_reject_binds_its_reason_and_only_a_reject_carries_one() -> None:
    auth, card = enrolled()
    reject = auth.decide(ASK, DIGEST, "reject", AT, reason="over the hotel cap")
    assert verify_assertion(reject, card, RP, ask_id=ASK, subject_digest=DIGEST, decision="reject") == 1
    reworded = reject.model_copy(update={"reason": "the agent may go ahead"})  # other words, the signature kept
    changed = refused(lambda: verify_assertion(reworded, card, RP, ask_id=ASK, subject_digest=DIGEST))
    assert (changed.rule, changed.code) == ("HATP-GW-67", "PASSKEY_WRONG_CHALLENGE")
    approve = auth.decide(ASK, DIGEST, "approve", AT, reason="fine")
    with_reason = refused(lambda: verify_assertion(approve, card, RP, ask_id=ASK, subject_digest=DIGEST))
    assert (with_reason.rule, with_reason.path) == ("HATP-GW-87", "$.reason")


@pytest.mark.parametrize(("ask", "digest"), [("txn-acme-0002/finance", DIGEST), (ASK, OTHER)])
def test_HATP_GW_67_an_assertion_for_another_ask_or_another_plan_digest_is_refused(ask: str, digest: str) -> None:
    auth, card = enrolled()
    a = auth.decide(ASK, DIGEST, "approve", AT)
    err = refused(lambda: verify_assertion(a, card, RP, ask_id=ask, subject_digest=digest))
    assert (err.rule, err.code) == ("HATP-GW-67", "PASSKEY_WRONG_SUBJECT")
    # signed over the other ask's challenge but presented as this one's: the recomputed challenge differs
    moved = auth.decide(ASK, DIGEST, "approve", AT, challenge_for={"ask_id": ask, "subject_digest": digest})
    err = refused(lambda: verify_assertion(moved, card, RP, ask_id=ASK, subject_digest=DIGEST))
    assert err.code == "PASSKEY_WRONG_CHALLENGE"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"origin": "http://evil.example:8400"}, "PASSKEY_WRONG_ORIGIN"),
        ({"origin": "http://localhost:8401"}, "PASSKEY_WRONG_ORIGIN"),  # the port is part of the origin
        ({"rp_id": "evil.example"}, "PASSKEY_WRONG_RP"),
        ({"uv": False}, "PASSKEY_NO_UV"),
        ({"flip_signature": True}, "PASSKEY_INVALID"),
    ],
)
def test_HATP_GW_68_wrong_origin_wrong_rp_id_no_user_verification_and_a_flipped_bit_are_refused(
    change: dict[str, Any], code: str
) -> None:
    auth, card = enrolled()
    a = auth.decide(ASK, DIGEST, "approve", AT, **change)
    err = refused(lambda: verify_assertion(a, card, RP, ask_id=ASK, subject_digest=DIGEST, decision="approve"))
    assert (err.rule, err.code) == ("HATP-GW-68", code)


def test_HATP_GW_69_a_sign_counter_that_does_not_move_forward_is_refused() -> None:
    auth, card = enrolled()
    a = auth.decide(ASK, DIGEST, "approve", AT, count=7)
    assert verify_assertion(a, card, RP, ask_id=ASK, subject_digest=DIGEST, last_count=6) == 7
    back = auth.decide(ASK, DIGEST, "approve", AT, count=5)
    err = refused(lambda: verify_assertion(back, card, RP, ask_id=ASK, subject_digest=DIGEST, last_count=7))
    assert (err.rule, err.code) == ("HATP-GW-69", "PASSKEY_COUNTER")


def test_HATP_GW_68_a_credential_not_on_the_signed_card_never_counts() -> None:
    auth, _card = enrolled()
    plain = Directory.load(well_known(), [card_doc("bob")])[0].card(h("bob"))  # the card without the passkey
    a = auth.decide(ASK, DIGEST, "approve", AT)
    err = refused(lambda: verify_assertion(a, plain, RP, ask_id=ASK, subject_digest=DIGEST))
    assert (err.rule, err.code, err.path) == ("HATP-GW-68", "PASSKEY_NOT_ON_CARD", "$.credentialId")


def test_HATP_GW_71_a_card_re_signed_by_a_key_that_is_not_the_directorys_is_ignored_so_its_passkey_never_counts() -> (
    None
):
    auth = SoftAuthenticator(h("bob"))
    body = {k: v for k, v in card_doc("bob").items() if k != "signature"}
    body["keys"] = [*body["keys"], auth.card_key()]
    forged = sign_object(body, SigningKey.generate(["directory"], kid="acme.com-directory-test-only"))
    directory, ignored = Directory.load(well_known(), [forged])
    assert directory.card(h("bob")) is None and [i.card_id for i in ignored] == [h("bob")]
    a = auth.decide(ASK, DIGEST, "approve", AT)
    err = refused(lambda: verify_assertion(a, directory.card(h("bob")), RP, ask_id=ASK, subject_digest=DIGEST))
    assert (err.rule, err.code) == ("HATP-GW-68", "PASSKEY_NOT_ON_CARD")


def approval_with(decisions: list[dict[str, Any]]) -> Approval:
    raw = {
        "approvalId": "apr-0001",
        "txnId": "txn-acme-0001",
        "requirementId": "finance",
        "planDigest": DIGEST,
        "decision": "approve",
        "decisions": decisions,
        "quorum": {"required": len(decisions), "of": len(decisions)},
        "routing": {
            "address": "human://acme.com/role/finance-approver?passkey=required",
            "planDigest": DIGEST,
            "requester": h("dana"),
            "checked": {"status": "checked", "action": "travel.spend"},
            "humans": [],
        },
        "gateway": "https://acme.com/hatp/gateway",
        "nonce": "n" * 16,
        "issuedAt": AT,
    }
    return Approval.model_validate(raw)


def test_HATP_GW_70_in_a_passkey_group_only_passkey_decisions_count_offline_and_a_nonce_counts_once() -> None:
    bob, bob_card = enrolled("bob")
    carol, carol_card = enrolled("carol")
    humans = HumanKeys.from_cards([bob_card, carol_card], passkey_rp=RP)
    ok = [
        {
            "approver": h("bob"),
            "decision": "approve",
            "decidedAt": AT,
            "passkey": bob.decide(ASK, DIGEST, "approve", AT).wire(),
        },
        {
            "approver": h("carol"),
            "decision": "approve",
            "decidedAt": AT,
            "passkey": carol.decide(ASK, DIGEST, "approve", AT).wire(),
        },
    ]
    check_decision_proofs(approval_with(ok), humans)
    ed25519_only = [ok[0], {"approver": h("carol"), "decision": "approve", "decidedAt": AT}]
    err = refused(lambda: check_decision_proofs(approval_with(ed25519_only), humans))
    assert (err.rule, err.path) == ("HATP-GW-70", "$.decisions[1].passkey") and "requires one" in err.reason
    no_rp = refused(lambda: check_decision_proofs(approval_with(ok), HumanKeys.from_cards([bob_card, carol_card])))
    assert no_rp.rule == "HATP-GW-70" and "not checked, not counted" in no_rp.reason
    twice = bob.decide(ASK, DIGEST, "approve", AT, nonce="the-same-nonce-twice")
    again = bob.decide(ASK, DIGEST, "approve", AT, nonce="the-same-nonce-twice")
    reused = [{**ok[0], "passkey": twice.wire()}, {**ok[0], "passkey": again.wire()}]
    err = refused(lambda: check_decision_proofs(approval_with(reused), humans))
    assert (err.rule, err.path) == ("HATP-GW-26", "$.decisions[1].passkey.nonce")
    other_card = refused(lambda: check_decision_proofs(approval_with([{**ok[1], "approver": h("bob")}]), humans))
    assert other_card.rule == "HATP-GW-67"  # carol's assertion recorded as bob's decision


def test_HATP_GW_70_a_verifier_with_a_clock_bounds_a_passkey_decisions_age_like_a_proofs() -> None:
    bob, bob_card = enrolled("bob")
    carol, carol_card = enrolled("carol")
    humans = HumanKeys.from_cards([bob_card, carol_card], passkey_rp=RP)
    decisions = [
        {
            "approver": h(n),
            "decision": "approve",
            "decidedAt": AT,
            "passkey": a.decide(ASK, DIGEST, "approve", AT).wire(),
        }
        for n, a in (("bob", bob), ("carol", carol))
    ]
    need = HumanRequirement(address="human://acme.com/role/finance-approver?passkey=required", action="travel.spend")
    fresh = check_humans_meet(approval_with(decisions), need, humans, now=parse_ts(AT), max_age=timedelta(minutes=10))
    assert fresh == [h("bob"), h("carol")]
    later = parse_ts(AT) + timedelta(hours=1)
    err = refused(
        lambda: check_humans_meet(approval_with(decisions), need, humans, now=later, max_age=timedelta(minutes=10))
    )
    assert (err.rule, err.path) == ("HATP-GW-46", "$.decisions[0].passkey.issuedAt")


def test_HATP_GW_87_offline_a_passkey_rejects_recorded_reason_must_be_the_one_it_signed() -> None:
    bob, bob_card = enrolled("bob")
    humans = HumanKeys.from_cards([bob_card], passkey_rp=RP)
    signed = bob.decide(ASK, DIGEST, "reject", AT, reason="over the hotel cap").wire()
    rejected = {"approver": h("bob"), "decision": "reject", "decidedAt": AT, "passkey": signed}

    def approval(reason: str | None) -> Approval:
        return approval_with([rejected | {"reason": reason}]).model_copy(update={"decision": "reject"})

    check_decision_proofs(approval("over the hotel cap"), humans)
    err = refused(lambda: check_decision_proofs(approval("go ahead"), humans))
    assert (err.rule, err.path) == ("HATP-GW-87", "$.decisions[0].reason")


def test_HATP_GW_97_the_gateway_refuses_a_stale_assertion_with_its_time_in_words() -> None:
    auth, card = enrolled()
    a = auth.decide(ASK, DIGEST, "approve", AT)
    later = parse_ts(AT) + timedelta(minutes=15)
    err = refused(lambda: verify_assertion(a, card, RP, ask_id=ASK, subject_digest=DIGEST, now=later))
    assert (err.rule, err.code, err.path) == ("HATP-GW-25", "STALE", "$.issuedAt")
    assert err.reason == (
        "the assertion was issued at 2026-11-29 10:05 UTC (15 min ago); only assertions from the last 600 s"
        " (and at most 60 s ahead) count"
    )

"""check_humans_meet: the one check, shared by the approval gate and the coordinator, that an approval's human
proofs meet a requirement (spec/gateway.md section 8, HATP-GW-41..46). Planted violations: each approval below is
one a compromised gateway key could sign, and each is refused with its rule."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from hatp_mcp.core.gateway.proof import HumanKeys, sign_decision
from hatp_mcp.core.gateway.requirement import HumanRequirement, check_humans_meet
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.errors import HatpError
from tests.acme_org import directory, h, human_key, human_keys, resigned

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
ADDRESS = "human://acme.com/role/finance-approver?quorum=2-of-3"
DIGEST = "sha256:" + "ab" * 32
NEED = HumanRequirement(address=ADDRESS, action="travel.spend", up_to={"USD": Decimal("2500")}, requester=h("dana"))


def decision(name: str, when: datetime = NOW, **over: Any) -> dict[str, Any]:
    p = sign_decision(human_key(name), "apr-1", DIGEST, h(name), "approve", when, nonce=secrets.token_urlsafe(18))
    return {"approver": h(name), "decision": "approve", "decidedAt": format_ts(when), "proof": p.wire(), **over}


def approval(*people: str, routing: dict[str, Any] | None = None, **over: Any) -> Approval:
    doc: dict[str, Any] = {
        "type": "hatp.approval",
        "approvalId": "apr-1",
        "subject": "tool-call",
        "requirementId": "charge_card",
        "planDigest": DIGEST,
        "decision": "approve",
        "decisions": [decision(n) for n in people],
        "quorum": {"required": 2, "of": 3},
        "routing": {
            "address": ADDRESS,
            "planDigest": DIGEST,
            "requester": h("dana"),
            "checked": {"status": "checked", "action": "travel.spend", "amounts": []},
            **(routing or {}),
        },
        "gateway": "https://acme.com/hatp/gateway",
        "nonce": "n" * 16,
        "issuedAt": format_ts(NOW),
        **over,
    }
    return Approval.model_validate({k: v for k, v in doc.items() if v is not None})


def refused(a: Approval, need: HumanRequirement = NEED, people: HumanKeys | None = None, **kw: Any) -> HatpError:
    with pytest.raises(HatpError) as e:
        check_humans_meet(a, need, people or human_keys(), **kw)
    return e.value


def test_two_proven_finance_approvers_with_authority_meet_the_requirement() -> None:
    got = check_humans_meet(approval("bob", "alice"), NEED, human_keys(), now=NOW, max_age=timedelta(minutes=10))
    assert got == [h("bob"), h("alice")]


def test_HATP_GW_41_an_approval_routed_elsewhere_does_not_meet_it() -> None:
    err = refused(approval("bob", "alice", routing={"address": "human://acme.com/bob"}))
    assert (err.rule, err.code, err.path) == ("HATP-GW-41", "ROUTED_ELSEWHERE", "$.routing.address")


def test_HATP_GW_42_the_requester_is_named_is_the_proven_one_and_does_not_approve() -> None:
    with pytest.raises(ValueError, match="requester"):  # the wire requires it: leaving it out switches nothing off
        approval("bob", "alice", routing={"requester": None})
    other = approval("bob", "alice", routing={"requester": h("carol")})
    assert (refused(other).code, refused(other).path) == ("REQUESTER_MISMATCH", "$.routing.requester")
    agent = approval("bob", "alice", routing={"requester": "agent://acme.com/travel-bot"})
    unproven = HumanRequirement(address=ADDRESS, action="travel.spend", up_to=NEED.up_to)  # nothing proven: named only
    assert "not one person" in refused(agent, unproven).reason
    own = approval("bob", "dana")
    err = refused(own)
    assert (err.rule, err.code, err.path) == ("HATP-GW-42", "SEPARATION_OF_DUTIES", "$.decisions[1]")


def test_HATP_GW_43_a_person_counted_twice_does_not_meet_a_quorum() -> None:
    twice = approval("bob").model_copy(update={"decisions": approval("bob", "bob").decisions})
    err = refused(twice)
    assert (err.rule, err.path) == ("HATP-GW-43", "$.decisions[1]")


def test_HATP_GW_44_the_address_quorum_holds_however_the_approval_states_it() -> None:
    lowered = approval("bob", quorum={"required": 1, "of": 3})
    err = refused(lowered)
    assert (err.rule, err.code) == ("HATP-GW-44", "QUORUM_NOT_MET") and "needs 2" in err.reason


def test_HATP_GW_45_each_approver_is_named_by_the_address_and_has_authority_on_their_card() -> None:
    err = refused(approval("bob", "erin"))  # erin: travel.spend up to $500
    assert (err.rule, err.code, err.path) == ("HATP-GW-45", "AUTHORITY", "$.decisions[1].approver")
    euros = HumanRequirement(address=ADDRESS, action="travel.spend", up_to={"EUR": Decimal("1")}, requester=h("dana"))
    assert "no limit in EUR" in refused(approval("bob", "alice"), euros).reason
    other_action = HumanRequirement(address=ADDRESS, action="payroll.run", requester=h("dana"))
    assert "no authority for 'payroll.run'" in refused(approval("bob", "alice"), other_action).reason
    outsider = resigned("alice", roles=["security-leads"])  # nobody delegates to alice
    cards = directory(extra=[outsider], only=["bob", "carol", "dana", "erin", "frank"]).cards()
    err = refused(approval("bob", "alice"), people=HumanKeys.from_cards(cards))
    assert (err.rule, err.code) == ("HATP-GW-45", "NOT_AN_APPROVER")
    keys_only = HumanKeys(human_keys().by_human)  # keys prove who decided, never that they could
    assert refused(approval("bob", "alice"), people=keys_only).code == "NOT_AN_APPROVER"


def test_HATP_GW_46_proofs_are_fresh_against_the_verifiers_clock_not_decidedAt() -> None:
    old = NOW - timedelta(days=30)
    stale = approval(decisions=[decision("bob", old), decision("alice", old)])
    assert check_humans_meet(stale, NEED, human_keys())  # no clock: only HATP-GW-25 against decidedAt ran
    err = refused(stale, now=NOW, max_age=timedelta(minutes=75))
    assert (err.rule, err.code, err.path) == ("HATP-GW-46", "DECISION_STALE", "$.decisions[0].proof.issuedAt")
    ahead = approval(decisions=[decision("bob", NOW + timedelta(minutes=5)), decision("alice")])
    assert refused(ahead, now=NOW, max_age=timedelta(minutes=75)).rule == "HATP-GW-46"


def test_without_the_cards_only_the_approvals_own_statements_are_checked() -> None:
    unproven = {"approver": h("bob"), "decision": "approve", "decidedAt": format_ts(NOW)}
    bare = approval(decisions=[unproven, decision("alice")])
    assert check_humans_meet(bare, NEED, None) == [h("bob"), h("alice")]
    assert refused(bare).rule == "HATP-GW-27"  # with the cards, bob's decision has no proof


def test_HATP_GW_97_a_stale_proof_names_the_approver_by_their_card_and_the_time_in_words() -> None:
    old = NOW - timedelta(minutes=80)
    stale = approval(decisions=[decision("bob", old), decision("alice", old)])
    err = refused(stale, now=NOW, max_age=timedelta(minutes=75))
    assert err.reason == (
        "the proof of Bob Brown (human://acme.com/bob) was issued at 2026-11-29 08:40 UTC (80 min ago) by the"
        " verifier's own clock; only proofs from the last 4500 s count, whatever decidedAt says"
    )

"""What the coordinator checks before an approver's answer counts (pure)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from demo.trip_world import AIRLINE, trip_plan
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.money import plan_money
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import sign_object
from hatp_mcp.core.txn.evidence_checks import (
    check_approval_meets,
    check_approver_answer,
    check_branch_receipt,
    check_branch_vote,
)
from hatp_mcp.errors import HatpError
from tests.core.txn.test_machine import KEYS, NOW, RING, answer


def _gateway_answer(plan: Plan, **changes: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    digest = plan.digest()
    totals, up_to = (([a.wire() for a in side]) for side in plan_money(plan).amounts())
    vote = {
        "type": "hatp.vote",
        "txnId": plan.txn_id,
        "branchId": "finance",
        "planDigest": digest,
        "voter": "gateway://acme.com",
        "decision": "yes",
        "issuedAt": format_ts(NOW),
    }
    approval: dict[str, Any] = {
        "type": "hatp.approval",
        "approvalId": "apr-1",
        "subject": "plan",
        "txnId": plan.txn_id,
        "requirementId": "finance",
        "planDigest": digest,
        "decision": "approve",
        "decisions": [
            {"approver": "human://acme.com/alice", "decision": "approve", "decidedAt": format_ts(NOW), "via": "inbox"}
        ],
        "quorum": {"required": 1, "of": 3},
        "routing": {
            "address": "human://acme.com/role/finance-approver",
            "planDigest": digest,
            "requester": "human://acme.com/dana",
            "planTotals": totals,
            "upTo": up_to,
            "checked": {"status": "checked", "action": "travel.spend", "amounts": up_to},
        },
        "gateway": "gateway://acme.com",
        "nonce": "n" * 16,
        "issuedAt": format_ts(NOW),
    }
    for path, value in changes.items():
        target = approval
        *parents, last = path.split(".")
        for p in parents:
            target = target[p]
        target[last] = value
    return vote, approval


def test_an_approval_counts_only_when_signed_by_the_gateway_quorate_and_checked() -> None:
    plan = trip_plan(NOW)
    g = KEYS["gateway"]
    vote, approval = _gateway_answer(plan)
    check_approver_answer(plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING)
    cases = [
        (
            "HATP-TXN-3",
            "AUTHORITY_NOT_CHECKED",
            _gateway_answer(plan, **{"routing.checked": {"status": "absent", "amounts": []}}),
        ),
        # HATP-TXN-3: "checked", but against less than the plan's own total (recomputed from the plan, HATP-GW-7)
        (
            "HATP-TXN-3",
            "AUTHORITY_NOT_CHECKED",
            _gateway_answer(
                plan, **{"routing.checked": {"status": "checked", "amounts": [{"value": "10.00", "currency": "USD"}]}}
            ),
        ),
        (  # HATP-TXN-20: the quorum is the coordinator's own count of distinct people (HATP-GW-43)
            "HATP-TXN-20",
            "QUORUM_NOT_MET",
            _gateway_answer(
                plan,
                **{
                    "quorum": {"required": 2, "of": 3},
                    "decisions": [approval["decisions"][0], approval["decisions"][0]],
                },
            ),
        ),
    ]
    for rule, code, (v, a) in cases:
        with pytest.raises(HatpError) as err:
            check_approver_answer(plan, plan.digest(), "finance", sign_object(v, g), sign_object(a, g), RING)
        assert (err.value.rule, err.value.code) == (rule, code)
    with pytest.raises(HatpError) as err:  # a participant key is not a gateway
        check_approver_answer(
            plan, plan.digest(), "finance", sign_object(vote, KEYS["airline"]), sign_object(approval, g), RING
        )
    assert err.value.rule == "HATP-TXN-3" and "HATP-SIG-5" in err.value.reason
    with pytest.raises(HatpError) as err:
        check_approver_answer(plan, plan.digest(), "finance", sign_object(vote, g), None, RING)
    assert err.value.code == "NO_APPROVAL"


def _expired_refusal(ago: timedelta) -> HatpError:
    """What check_approver_answer raises for the gateway's yes with an approval that expired `ago` before NOW."""
    plan = trip_plan(NOW)
    g = KEYS["gateway"]
    vote, approval = _gateway_answer(plan, expiresAt=format_ts(NOW - ago))
    with pytest.raises(HatpError) as err:
        check_approver_answer(plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING, NOW)
    return err.value


def test_an_expired_approval_does_not_count() -> None:
    refused = _expired_refusal(timedelta(seconds=1))
    assert (refused.rule, refused.code) == ("HATP-TXN-3", "APPROVAL_EXPIRED")


def test_HATP_GW_97_an_expired_approval_says_its_time_in_words_without_a_countdown_as_the_record_keeps_it() -> None:
    refused = _expired_refusal(timedelta(minutes=5))
    # the coordinator journals this reason as its abort's: a countdown would be wrong when the record is read later
    assert refused.reason == "the approval expired at 2026-11-29 09:55 UTC"
    assert (refused.path, refused.code) == ("approval.expiresAt", "APPROVAL_EXPIRED")


def test_with_the_cards_a_decision_counts_only_with_its_persons_proof_HATP_TXN_19() -> None:
    import secrets

    from hatp_mcp.core.gateway.proof import sign_decision
    from tests.acme_org import human_key, human_keys

    plan = trip_plan(NOW)
    g = KEYS["gateway"]
    vote, approval = _gateway_answer(plan)
    # the gateway vouches for alice, but alice's own proof is missing
    with pytest.raises(HatpError) as err:
        check_approver_answer(
            plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING, NOW, human_keys()
        )
    assert (err.value.rule, err.value.code) == ("HATP-TXN-19", "DECISION_NOT_PROVEN")
    assert "HATP-GW-27" in err.value.reason and err.value.path == "approval.decisions[0].proof"
    # erin's key signing alice's decision is no proof either
    ask_id = f"{plan.txn_id}/finance"

    def proof(key_of: str) -> dict[str, Any]:
        p = sign_decision(
            human_key(key_of),
            ask_id,
            plan.digest(),
            "human://acme.com/alice",
            "approve",
            NOW,
            nonce=secrets.token_urlsafe(18),
        )
        return p.wire()

    approval["decisions"][0]["proof"] = proof("erin")
    with pytest.raises(HatpError) as err:
        check_approver_answer(
            plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING, NOW, human_keys()
        )
    assert err.value.rule == "HATP-TXN-19" and "HATP-GW-20" in err.value.reason
    # alice's own proof counts
    approval["decisions"][0]["proof"] = proof("alice")
    check_approver_answer(
        plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING, NOW, human_keys()
    )


def test_a_gateway_answer_counts_only_from_a_key_bound_to_that_gateway_HATP_TXN_3_HATP_SIG_6() -> None:
    from hatp_mcp.core.signing.keys import Keyring, SigningKey

    plan = trip_plan(NOW)
    vote, approval = _gateway_answer(plan)
    other = SigningKey.generate(["gateway"], kid="other-gw")
    for party in (None, "gateway://evil.example"):  # unbound (fail closed), or bound to another gateway
        ring = Keyring()
        ring.add_signer(other, party)
        with pytest.raises(HatpError) as err:
            check_approver_answer(
                plan, plan.digest(), "finance", sign_object(vote, other), sign_object(approval, other), ring, NOW
            )
        assert (err.value.rule, err.value.code) == ("HATP-TXN-3", "KEY_NOT_THE_GATEWAYS")
        assert "HATP-SIG-6" in err.value.reason


def _prepare_evidence(plan: Plan, branch: str, signer: str, **body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A vote and a prepare receipt for `branch` in the airline's name, signed with KEYS[signer]."""
    prepared = answer(plan, branch, AIRLINE, KEYS[signer])
    receipt = {k: v for k, v in prepared.receipt.items() if k != "signature"}
    return prepared.vote, sign_object({**receipt, **body}, KEYS[signer])


def test_a_receipt_naming_the_airline_but_signed_with_the_hotels_key_does_not_count_HATP_TXN_2() -> None:
    plan = trip_plan(NOW)
    branch = plan.branch("seat")
    vote, _ = _prepare_evidence(plan, "seat", "airline")
    _, forged = _prepare_evidence(plan, "seat", "hotel")  # every member the airline's; the hotel's signature
    check_branch_vote(plan, plan.digest(), branch, vote, RING)  # the vote is the airline's own: it counts
    with pytest.raises(HatpError) as err:
        check_branch_receipt(plan, plan.digest(), branch, forged, RING, {"prepare"})
    assert (err.value.rule, err.value.code) == ("HATP-TXN-2", "KEY_NOT_THE_PARTICIPANTS")
    assert err.value.path == "receipt.signature.kid"


def test_a_vote_or_receipt_over_another_plan_digest_does_not_count_HATP_TXN_2() -> None:
    plan = trip_plan(NOW)
    branch = plan.branch("seat")
    other = "sha256:" + "0" * 64
    vote = sign_object(
        {
            **{k: v for k, v in answer(plan, "seat", AIRLINE, KEYS["airline"]).vote.items() if k != "signature"},
            "planDigest": other,
        },
        KEYS["airline"],
    )
    with pytest.raises(HatpError) as err:
        check_branch_vote(plan, plan.digest(), branch, vote, RING)
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-TXN-2", "BAD_EVIDENCE", "vote.planDigest")
    _, receipt = _prepare_evidence(plan, "seat", "airline", planDigest=other)
    with pytest.raises(HatpError) as err:
        check_branch_receipt(plan, plan.digest(), branch, receipt, RING, {"prepare"})
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-TXN-2", "BAD_EVIDENCE", "receipt.planDigest")


def _proven(plan: Plan, people: list[str]) -> list[dict[str, Any]]:
    """Decisions with each person's own valid proof on this plan's finance ask."""
    import secrets

    from hatp_mcp.core.gateway.proof import sign_decision
    from tests.acme_org import h, human_key

    out = []
    for n in people:
        p = sign_decision(
            human_key(n), f"{plan.txn_id}/finance", plan.digest(), h(n), "approve", NOW, nonce=secrets.token_urlsafe(18)
        )
        out.append({"approver": h(n), "decision": "approve", "decidedAt": format_ts(NOW), "proof": p.wire()})
    return out


def _meets(plan: Plan, humans: Any = None, **changes: Any) -> HatpError:
    g = KEYS["gateway"]
    vote, approval = _gateway_answer(plan, **changes)
    with pytest.raises(HatpError) as err:
        check_approver_answer(
            plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING, NOW, humans
        )
    return err.value


def test_HATP_TXN_20_the_coordinator_checks_address_quorum_and_requester_against_the_plan_itself() -> None:
    from tests.acme_org import h, human_keys
    from tests.acme_org import plan as acme_plan

    plan = acme_plan(["2500"], address="human://acme.com/role/finance-approver?quorum=2-of-3")
    addr = plan.approvals[0].address
    good = {"routing.address": addr, "quorum": {"required": 2, "of": 3}, "decisions": _proven(plan, ["bob", "alice"])}
    g = KEYS["gateway"]
    vote, approval = _gateway_answer(plan, **good)
    check_approver_answer(
        plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING, NOW, human_keys()
    )
    # each of these the gateway's key alone could sign, and each counted before
    elsewhere = _meets(plan, **{**good, "routing.address": "human://acme.com/bob"})
    assert (elsewhere.rule, elsewhere.code, elsewhere.path) == (
        "HATP-TXN-20",
        "ROUTED_ELSEWHERE",
        "approval.routing.address",
    )
    lowered = _meets(plan, **{**good, "quorum": {"required": 1, "of": 3}, "decisions": _proven(plan, ["bob"])})
    assert (lowered.rule, lowered.code) == ("HATP-TXN-20", "QUORUM_NOT_MET") and "HATP-GW-44" in lowered.reason
    other = _meets(plan, **{**good, "routing.requester": h("carol")})
    assert (other.rule, other.code) == ("HATP-TXN-20", "REQUESTER_MISMATCH") and h("dana") in other.reason
    vote, approval = _gateway_answer(plan, **good)
    del approval["routing"]["requester"]
    with pytest.raises(HatpError) as err:
        check_approver_answer(plan, plan.digest(), "finance", sign_object(vote, g), sign_object(approval, g), RING)
    assert (err.value.rule, err.value.code) == (
        "HATP-TXN-3",
        "BAD_EVIDENCE",
    ) and "routing.requester" in err.value.reason
    own = _meets(plan, **{**good, "decisions": _proven(plan, ["bob", "dana"])})
    assert (own.rule, own.code) == ("HATP-TXN-20", "SEPARATION_OF_DUTIES")


def test_HATP_TXN_20_with_the_cards_an_approver_without_authority_for_the_plans_total_does_not_count() -> None:
    from tests.acme_org import human_keys
    from tests.acme_org import plan as acme_plan

    plan = acme_plan(["2500"], address="human://acme.com/role/finance-approver?quorum=2-of-3")
    changes = {
        "routing.address": plan.approvals[0].address,
        "quorum": {"required": 2, "of": 3},
        "decisions": _proven(plan, ["bob", "erin"]),  # erin's card: up to $500
    }
    err = _meets(plan, human_keys(), **changes)
    assert (err.rule, err.code, err.path) == ("HATP-TXN-20", "AUTHORITY", "approval.decisions[1].approver")
    assert "$500.00 is below $2,500.00" in err.reason


def test_HATP_TXN_20_an_approval_for_a_requirement_the_plan_does_not_have_meets_nothing() -> None:
    from tests.acme_org import plan as acme_plan

    plan = acme_plan(["2500"])
    _, approval = _gateway_answer(plan, requirementId="legal")
    with pytest.raises(HatpError) as err:
        check_approval_meets(plan, "legal", Approval.model_validate(approval), None)
    assert (err.value.rule, err.value.code) == ("HATP-TXN-20", "BAD_EVIDENCE")
    assert err.value.reason == "no approval requirement 'legal'"


def test_HATP_TXN_21_a_plans_requester_counts_only_as_the_agents_card_proves_it() -> None:
    """Issue 12: begin_transaction took the plan's `requester` on the agent's word."""
    from hatp_mcp.core.signing.keys import SigningKey
    from hatp_mcp.core.txn.evidence_checks import check_plan_requester
    from tests.acme_org import agent_keys, agent_request, h

    plan = trip_plan(NOW)  # agent://acme.com/travel-bot for human://acme.com/dana
    digest = plan.digest()
    assert check_plan_requester(plan, digest, agent_request(digest, NOW, subject="plan"), agent_keys(), NOW) == h(
        "dana"
    )
    as_bob = trip_plan(NOW, requester={"principal": h("bob"), "agent": "agent://acme.com/travel-bot"})
    cases = {
        "no request": (plan, None, "HATP-GW-47"),
        "a key not on the card": (
            plan,
            agent_request(digest, NOW, subject="plan", key=SigningKey.generate(["agent"], "k")),
            "HATP-GW-47",
        ),
        "about a tool call": (plan, agent_request(digest, NOW), "HATP-GW-48"),
        "about another plan": (plan, agent_request("sha256:" + "1" * 64, NOW, subject="plan"), "HATP-GW-48"),
        "the plan names bob": (as_bob, agent_request(as_bob.digest(), NOW, subject="plan"), "$.requester.principal"),
    }
    for case, (p, request, why) in cases.items():
        with pytest.raises(HatpError) as err:
            check_plan_requester(p, p.digest(), request, agent_keys(), NOW)
        assert (err.value.rule, err.value.code) == ("HATP-TXN-21", "REQUESTER_NOT_PROVEN"), case
        assert why in err.value.reason or why == err.value.path, case

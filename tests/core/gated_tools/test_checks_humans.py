"""The gate checks the humans itself (issue 12): with the gateway's key alone an attacker re-signs approvals; each
one here was accepted before and is refused now, with its rule. And the gated path refuses the amounts plans
refuse, before anyone is asked (spec/gated-tools.md, HATP-GATE-10, 12..14, 18, 23..25)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.gated_tools.checks import GatePolicy, check_approval, expected_call, replay_keys
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.errors import HatpError
from tests.acme_org import agent_keys, agent_request, directory, gateway_key, h, human_keys, keyring, proof, resigned
from tests.core.gated_tools.test_checks import ARGS, DEFINED_AT, NOW, REQ, SERVER, TOOL_DIGEST, ask, call, issue
from tests.core.gated_tools.test_checks import resigned as gateway_resigned

AT = NOW + timedelta(minutes=2)


def check(raw: object, **kw: Any) -> Approval:
    opts: dict[str, Any] = {
        "expected": call(),
        "requirement": REQ,
        "trusted": keyring(),
        "humans": human_keys(),
        "now": AT,
        "defined_at": DEFINED_AT,
    }
    return check_approval(raw, **{**opts, **kw})


def refused(raw: object, **kw: Any) -> HatpError:
    with pytest.raises(HatpError) as e:
        check(raw, **kw)
    assert e.value.code == "APPROVAL_INVALID"
    return e.value


def decisions_by(people: list[tuple[str, datetime]]) -> list[dict[str, Any]]:
    """Decisions each carrying the person's own valid proof on this call's ask, signed at the time given."""
    the_ask = ask(call())[0].ask
    return [
        {
            "approver": h(n),
            "decision": "approve",
            "decidedAt": _ts(when),
            "via": "inbox",
            "proof": proof(the_ask, n, "approve", when),
        }
        for n, when in people
    ]


def _ts(when: datetime) -> str:
    return format_ts(when)


@pytest.mark.parametrize(
    ("amount", "why"),
    [
        ({"value": "-2500.00", "currency": "USD"}, "negative"),
        ({"value": float("nan"), "currency": "USD"}, "not a finite number"),
        ({"value": float("inf"), "currency": "USD"}, "not a finite number"),
        ({"value": "Infinity", "currency": "USD"}, "not a finite number"),
        ({"value": "2500.00", "currency": "ZZZ"}, "not an ISO 4217 currency"),
    ],
)
def test_HATP_GATE_23_a_negative_non_finite_or_unknown_currency_amount_is_refused_on_both_sides(
    amount: dict[str, Any], why: str
) -> None:
    bad = {**ARGS, "amount": amount}
    with pytest.raises(HatpError) as gate:
        expected_call(SERVER, "charge_card", bad, REQ, TOOL_DIGEST)  # the tool server, before APPROVAL_REQUIRED
    assert (gate.value.rule, gate.value.path) == ("HATP-GATE-23", "arguments/amount") and why in gate.value.reason
    with pytest.raises(HatpError) as gw:
        ask(call(), args=bad)  # the gateway, before routing: nobody is asked
    assert gw.value.rule == "HATP-GATE-23" and why in gw.value.reason


def test_HATP_GATE_18_the_same_proofs_re_signed_under_a_new_nonce_are_the_same_approval() -> None:
    doc = issue()
    again = gateway_resigned(doc, nonce="a-brand-new-nonce-000000")
    first, second = (replay_keys(Approval.from_wire(d)) for d in (doc, again))
    assert first[0] != second[0]  # the nonce differs ...
    assert set(first[1:]) == set(second[1:]) and f"approval:{doc['approvalId']}" in second  # ... the id and proofs not
    assert len(second) == 4  # nonce, id, and each person's proof
    # the gate's replay cache has spent `first`: any one of those keys seen refuses the re-signed approval
    err = refused(again, nonce_used=bool(set(first) & set(second)))
    assert err.rule == "HATP-GATE-18" and "proofs" in err.reason


def test_HATP_GATE_24_proofs_30_days_old_are_refused_whatever_decidedAt_says() -> None:
    old = NOW - timedelta(days=30)
    doc = gateway_resigned(issue(), decisions=decisions_by([("bob", old), ("alice", old)]))
    err = refused(doc)
    assert err.rule == "HATP-GATE-24" and "HATP-GW-46" in err.reason and err.path == "$.decisions[0].proof.issuedAt"
    # the same proofs, freshly signed, pass: only their age refused them
    assert check(gateway_resigned(issue(), decisions=decisions_by([("bob", NOW), ("alice", NOW)])))
    # the bound is the server's policy
    assert refused(issue(), policy=GatePolicy(max_proof_age=timedelta(seconds=30))).rule == "HATP-GATE-24"


def test_HATP_GATE_14_an_approval_without_a_requester_is_malformed_and_one_naming_no_person_is_refused() -> None:
    doc = issue()
    routing = {k: v for k, v in doc["routing"].items() if k != "requester"}
    err = refused(gateway_resigned(doc, routing=routing))  # HATP-GATE-2: the schema requires it
    assert (err.rule, err.path) == ("HATP-GATE-2", "routing.requester") and "required" in err.reason
    for not_a_person in ("agent://acme.com/travel-bot", "human://acme.com/role/finance-approver"):
        err = refused(gateway_resigned(doc, routing={**doc["routing"], "requester": not_a_person}))
        assert err.rule == "HATP-GATE-14" and "not one person" in err.reason


def test_HATP_GATE_25_an_approver_whose_card_limit_is_below_the_call_is_refused() -> None:
    # erin's card allows travel.spend up to $500; the call is $2,500: the gateway key put her proof in anyway
    doc = gateway_resigned(issue(), decisions=decisions_by([("bob", NOW), ("erin", NOW)]))
    err = refused(doc)
    assert (err.rule, err.path) == ("HATP-GATE-25", "$.decisions[1].approver")
    assert "limit $500.00 is below $2,500.00" in err.reason and "HATP-GW-45" in err.reason


def test_HATP_GATE_25_an_approver_the_required_address_does_not_name_is_refused() -> None:
    # a valid card, but not a finance approver, and no finance approver's delegate
    outsider = resigned("alice", roles=["security-leads"])
    cards = directory(extra=[outsider], only=["bob", "carol", "dana", "erin", "frank"]).cards()
    doc = gateway_resigned(issue(), decisions=decisions_by([("bob", NOW), ("alice", NOW)]))
    err = refused(doc, humans=HumanKeys.from_cards(cards))
    assert err.rule == "HATP-GATE-25" and "not someone" in err.reason


def test_HATP_GATE_10_an_expiry_beyond_the_servers_policy_is_refused() -> None:
    doc = issue()
    far = gateway_resigned(doc, expiresAt=_ts(NOW + timedelta(days=30)))
    err = refused(far)
    assert err.rule == "HATP-GATE-10" and "outlives this server's policy" in err.reason
    assert err.reason == (  # HATP-GW-97: the times in words, how far from the gate's clock
        "the approval, issued 2026-11-29 10:00 UTC (2 min ago) and expiring 2026-12-29 10:00 UTC (in 719 h 58 min),"
        " outlives this server's policy: at most 900 s from its issue and from now"
    )
    long_issued = gateway_resigned(doc, issuedAt=_ts(NOW - timedelta(hours=2)))  # 2 h 15 min from issue to expiry
    assert refused(long_issued).rule == "HATP-GATE-10"
    assert refused(doc, policy=GatePolicy(max_lifetime=timedelta(minutes=5))).rule == "HATP-GATE-10"


def test_the_attacks_leave_the_real_approval_valid() -> None:
    doc = issue()
    assert json.loads(json.dumps(check(doc).wire()))["approvalId"] == doc["approvalId"]
    assert gateway_key().kid == doc["signature"]["kid"]


def test_HATP_GATE_26_with_the_agent_cards_the_requester_is_proven_by_the_agents_own_request() -> None:
    doc = issue()
    with_request = gateway_resigned(doc, request=agent_request(doc["planDigest"], NOW))
    assert check(with_request, agents=agent_keys()).request is not None
    err = refused(doc, agents=agent_keys())  # no request inside: who the agent acts for is not proven
    assert (err.rule, err.path) == ("HATP-GATE-26", "$.request") and "HATP-GW-47" in err.reason
    other_call = gateway_resigned(doc, request=agent_request("sha256:" + "9" * 64, NOW))
    assert refused(other_call, agents=agent_keys()).rule == "HATP-GATE-26"
    for_bob = gateway_resigned(doc, request=agent_request(doc["planDigest"], NOW, acts_for=h("bob")))
    assert "HATP-GW-48" in refused(for_bob, agents=agent_keys()).reason


def test_HATP_GATE_14_dana_cannot_approve_her_own_agents_charge_by_the_gateway_naming_someone_else() -> None:
    # issue 12: requester declared as bob, so dana was eligible and approved the travel-bot's (her own) charge
    doc = issue()
    attack = gateway_resigned(
        doc,
        routing={**doc["routing"], "requester": h("bob")},
        decisions=decisions_by([("alice", NOW), ("dana", NOW)]),
        request=agent_request(doc["planDigest"], NOW),  # the travel-bot's: it acts for dana
    )
    err = refused(attack, agents=agent_keys())
    assert (err.rule, err.path) == ("HATP-GATE-14", "$.routing.requester") and h("dana") in err.reason

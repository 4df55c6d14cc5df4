"""check_approval: a gated call runs only with a gateway-signed approval of exactly this call. Every planted
violation is refused with its own rule id and reason (spec/gated-tools.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.gated_tools.checks import (
    APPROVAL_META_KEY,
    GateRequirement,
    Quote,
    approval_required,
    call_digest,
    check_approval,
    expected_call,
    resolve_pointer,
    tool_definition_digest,
)
from hatp_mcp.core.gated_tools.gateway_routing import build_tool_call_approval, open_tool_call_ask
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.toolcall import ToolCall
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from tests.acme_org import GATEWAY_ID, approve_as, directory, gateway_key, h, human_key, human_keys, keyring, proof

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SERVER = "mcp://payments.example"
REQ = GateRequirement(
    address="human://acme.com/role/finance-approver?quorum=2-of-3",
    action="travel.spend",
    amount_from="/amount",
    payee_from="/payee",
)
ARGS: dict[str, Any] = {"card": "tok_visa_4242", "amount": {"value": "2500.00", "currency": "USD"}, "payee": "acme"}
TOOL_DEF = {"name": "charge_card", "description": "Charge a card", "inputSchema": {"type": "object"}}
TOOL_DIGEST = tool_definition_digest(TOOL_DEF)
DEFINED_AT = NOW - timedelta(days=1)


def call(args: dict[str, Any] | None = None, tool: str = "charge_card", server: str = SERVER) -> ToolCall:
    return expected_call(server, tool, args or ARGS, REQ, TOOL_DIGEST)


def issue(
    c: ToolCall | None = None, approvers: tuple[str, ...] = ("bob", "alice"), requester: str = "dana"
) -> dict[str, Any]:
    c = c or call()
    rec, c = ask(c, requester)
    for name in approvers:
        rec = approve_as(rec, name, NOW + timedelta(minutes=1))
    appr = build_tool_call_approval(rec, c, gateway=GATEWAY_ID, nonce="nonce-0123456789abcdef", now=NOW)
    assert appr is not None
    return sign_object(appr.wire(), gateway_key())


def ask(c: ToolCall, requester: str = "dana", args: dict[str, Any] | None = None) -> Any:
    return open_tool_call_ask(
        server=c.server,
        tool=c.tool,
        arguments=args or ARGS,
        requirement=REQ,
        tool_digest=c.tool_digest,
        requester=h(requester),
        directory=directory(),
        gateway=GATEWAY_ID,
        now=NOW,
    )


def resigned(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The gateway itself signing a changed approval: only the rule under test can refuse it."""
    return sign_object({**doc, **changes}, gateway_key())


def check(raw: object, **kw: Any) -> Any:
    opts: dict[str, Any] = {
        "expected": call(),
        "requirement": REQ,
        "trusted": keyring(),
        "humans": human_keys(),
        "now": NOW + timedelta(minutes=2),
        "defined_at": DEFINED_AT,
    }
    opts.update(kw)
    return check_approval(raw, **opts)


def refused(raw: object, **kw: Any) -> HatpError:
    with pytest.raises(HatpError) as e:
        check(raw, **kw)
    assert e.value.code == "APPROVAL_INVALID"
    return e.value


def test_a_quorum_approval_of_this_exact_call_is_accepted() -> None:
    appr = check(issue())
    assert appr.subject == "tool-call" and appr.plan_digest == call_digest(call())
    assert [d.approver for d in appr.decisions] == [h("bob"), h("alice")]
    assert appr.routing.checked.status == "checked" and appr.routing.checked.amounts[0].value == "2500.00"


def test_a_gated_call_without_approval_says_what_to_ask_for_under_HATP_GATE_1() -> None:
    err = approval_required(call(), REQ)
    assert (err.rule, err.code) == ("HATP-GATE-1", "APPROVAL_REQUIRED")
    assert err.data["address"] == REQ.address
    assert err.data["requirement"] == {"action": "travel.spend", "amountFrom": "/amount", "payeeFrom": "/payee"}
    assert err.data["callDigest"] == call_digest(call()) and err.data["metaKey"] == APPROVAL_META_KEY


def test_a_truncated_or_malformed_approval_is_refused_under_HATP_GATE_2() -> None:
    doc = issue()
    text = json.dumps(doc)
    assert refused(text[: len(text) // 2]).rule == "HATP-GATE-2"
    missing = {k: v for k, v in doc.items() if k != "nonce"}
    err = refused(missing)
    assert (err.rule, err.path) == ("HATP-GATE-2", "nonce")
    assert refused(["not", "an", "object"]).rule == "HATP-GATE-2"
    assert refused(resigned(doc, subject="plan")).rule == "HATP-GATE-2"
    unsigned = {k: v for k, v in doc.items() if k != "signature"}
    assert refused(unsigned).rule == "HATP-GATE-2"


def test_a_forged_signature_is_refused_under_HATP_GATE_3() -> None:
    doc = issue()
    forged = {**doc, "expiresAt": "2027-01-01T00:00:00Z"}
    err = refused(forged)
    assert err.rule == "HATP-GATE-3" and "HATP-SIG-4" in err.reason


def test_a_signature_remembered_as_verified_vouches_for_no_other_bytes_or_key_under_HATP_GATE_3() -> None:
    """The gate's keyring remembers the signatures it verified (the SHA-256 of the exact key, signature and signed
    bytes), so one it checked before is not checked again. That memo never stands in for another check: the same
    signature over altered bytes, or relabelled as another trusted gateway key's, is verified and refused."""
    ring = keyring()
    other = SigningKey.generate(roles=["gateway"], kid="second-gateway")
    ring.add_signer(other)
    doc = issue()
    assert check(doc, trusted=ring).approval_id == doc["approvalId"]
    assert check(doc, trusted=ring).approval_id == doc["approvalId"]  # remembered: the same triple again
    tampered = {**doc, "expiresAt": "2026-11-29T10:10:00Z"}
    err = refused(tampered, trusted=ring)
    assert err.rule == "HATP-GATE-3" and "HATP-SIG-4" in err.reason
    relabelled = {**doc, "signature": {**doc["signature"], "kid": other.kid}}
    err = refused(relabelled, trusted=ring)
    assert err.rule == "HATP-GATE-3" and "HATP-SIG-4" in err.reason
    assert check(doc, trusted=ring).approval_id == doc["approvalId"]


def test_an_approval_signed_by_an_untrusted_gateway_is_refused_under_HATP_GATE_4() -> None:
    doc = issue()
    rogue = SigningKey.generate(roles=["gateway"], kid="rogue-gateway")
    err = refused(sign_object(doc, rogue))
    assert err.rule == "HATP-GATE-4" and "HATP-SIG-2" in err.reason
    wrong_role = SigningKey.generate(roles=["participant"], kid="a-participant")
    ring = keyring()
    ring.add_signer(wrong_role)
    err = refused(sign_object(doc, wrong_role), trusted=ring)
    assert err.rule == "HATP-GATE-4" and "HATP-SIG-5" in err.reason


def test_an_approval_for_another_server_is_refused_under_HATP_GATE_5() -> None:
    err = refused(issue(call(server="mcp://other.example")))
    assert err.rule == "HATP-GATE-5" and "mcp://other.example" in err.reason


def test_an_approval_for_another_tool_is_refused_under_HATP_GATE_6() -> None:
    err = refused(issue(call(tool="refund_card")))
    assert err.rule == "HATP-GATE-6" and "refund_card" in err.reason


def test_changed_arguments_are_refused_under_HATP_GATE_7() -> None:
    doc = issue()
    err = refused(doc, expected=call({**ARGS, "card": "tok_mastercard_5555"}))
    assert (err.rule, err.path) == ("HATP-GATE-7", "$.toolCall.argumentsDigest")


def test_a_tool_definition_changed_after_approval_is_refused_under_HATP_GATE_8() -> None:
    changed = tool_definition_digest({**TOOL_DEF, "description": "Charge a card and also export the card number"})
    err = refused(issue(), expected=expected_call(SERVER, "charge_card", ARGS, REQ, changed))
    assert err.rule == "HATP-GATE-8" and changed in err.reason


def test_an_approval_issued_before_the_tools_current_definition_is_refused_under_HATP_GATE_9() -> None:
    err = refused(issue(), defined_at=NOW + timedelta(seconds=30))
    assert err.rule == "HATP-GATE-9" and "in effect since 2026-11-29 10:00 UTC" in err.reason
    unbound = issue(call().model_copy(update={"tool_digest": None}))
    assert check(unbound).tool_call.tool_digest is None  # unbound, issued after the definition: accepted
    assert refused(unbound, defined_at=None).rule == "HATP-GATE-9"  # fail closed: when is unknown


def test_an_expired_approval_and_one_that_never_expires_are_refused_under_HATP_GATE_10() -> None:
    doc = issue()
    err = refused(doc, now=NOW + timedelta(minutes=15))
    assert err.rule == "HATP-GATE-10" and "expired at 2026-11-29 10:15 UTC" in err.reason
    forever = resigned({k: v for k, v in doc.items() if k != "expiresAt"})
    assert refused(forever).rule == "HATP-GATE-10"
    assert refused(forever).reason == "the approval never expires (refused: an approval must expire)"


# HATP-GW-97: a gated tool's refusal is read at once by the model that called it: times in words, with how long ago
# from the gate's clock where the gate has one, and never the wire's timestamps
def test_HATP_GW_97_an_expired_or_outdated_approval_is_refused_with_its_times_in_words() -> None:
    doc = issue()
    expired = refused(doc, now=NOW + timedelta(minutes=20))
    assert (expired.rule, expired.path) == ("HATP-GATE-10", "$.expiresAt")
    assert expired.reason == "the approval expired at 2026-11-29 10:15 UTC (5 min ago)"
    outdated = refused(doc, defined_at=NOW + timedelta(minutes=5))
    assert outdated.rule == "HATP-GATE-9"
    assert outdated.reason == (
        "the approval (issued 2026-11-29 10:00 UTC) predates the tool's current definition"
        " (in effect since 2026-11-29 10:05 UTC)"
    )


def test_a_rejected_decision_presented_as_approve_is_refused_under_HATP_GATE_11() -> None:
    doc = issue()
    flipped = json.loads(json.dumps(doc))
    flipped["decisions"][1]["decision"] = "reject"
    err = refused(resigned(flipped))
    assert err.rule == "HATP-GATE-11" and h("alice") in err.reason
    assert refused(resigned(doc, decision="reject")).rule == "HATP-GATE-11"


def test_too_few_approvers_for_the_quorum_are_refused_under_HATP_GATE_12() -> None:
    doc = issue()
    one = resigned(doc, decisions=doc["decisions"][:1])
    err = refused(one)
    assert err.rule == "HATP-GATE-12" and "needs 2" in err.reason
    lowered = resigned(one, quorum={"required": 1, "of": 3})  # the address still says 2-of-3
    assert refused(lowered).rule == "HATP-GATE-12"


def test_the_same_person_counted_twice_is_refused_under_HATP_GATE_13() -> None:
    doc = issue()
    twice = resigned(doc, decisions=[doc["decisions"][0], doc["decisions"][0]])
    err = refused(twice)
    assert (err.rule, err.path) == ("HATP-GATE-13", "$.decisions[1]")


def test_the_requester_approving_their_own_request_is_refused_under_HATP_GATE_14() -> None:
    doc = issue(requester="dana")
    routing = {**doc["routing"], "requester": h("bob")}
    err = refused(resigned(doc, routing=routing))
    assert err.rule == "HATP-GATE-14" and h("bob") in err.reason


def test_a_routing_record_with_an_absent_authority_check_is_refused_under_HATP_GATE_15() -> None:
    doc = issue()
    absent = {**doc["routing"], "checked": {"status": "absent", "action": "travel.spend", "amounts": []}}
    err = refused(resigned(doc, routing=absent))
    assert (err.rule, err.path) == ("HATP-GATE-15", "$.routing.checked")
    low = {**doc["routing"], "checked": {**doc["routing"]["checked"], "amounts": [{"value": "25", "currency": "USD"}]}}
    assert refused(resigned(doc, routing=low)).rule == "HATP-GATE-15"


def test_a_price_raised_above_the_approved_maximum_is_refused_under_HATP_GATE_16() -> None:
    ok = Quote(Amount.of("2499.99", "USD"), "acme")
    assert check(issue(), quote=ok).tool_call.max_amount.value == "2500.00"
    err = refused(issue(), quote=Quote(Amount.of("2500.01", "USD"), "acme"))
    assert err.rule == "HATP-GATE-16" and "$2,500.01" in err.reason
    assert refused(issue(), quote=Quote(Amount.of("1", "EUR"), "acme")).rule == "HATP-GATE-16"


def test_a_changed_payee_is_refused_under_HATP_GATE_17() -> None:
    err = refused(issue(), quote=Quote(Amount.of("2500.00", "USD"), "mallory"))
    assert err.rule == "HATP-GATE-17" and "mallory" in err.reason


def test_a_replayed_approval_is_refused_under_HATP_GATE_18() -> None:
    err = refused(issue(), nonce_used=True)
    assert (err.rule, err.path) == ("HATP-GATE-18", "$.nonce")


def test_an_approval_routed_to_another_address_is_refused_under_HATP_GATE_19() -> None:
    doc = issue()
    routing = {**doc["routing"], "address": "human://acme.com/erin"}
    assert refused(resigned(doc, routing=routing)).rule == "HATP-GATE-19"


def test_an_amount_the_arguments_do_not_carry_is_refused_under_HATP_GATE_20() -> None:
    with pytest.raises(HatpError) as e:
        expected_call(SERVER, "charge_card", {"card": "x", "payee": "acme", "amount": 12.5}, REQ, TOOL_DIGEST)
    assert (e.value.rule, e.value.path) == ("HATP-GATE-20", "arguments/amount")
    with pytest.raises(HatpError) as e:
        expected_call(SERVER, "charge_card", {"amount": ARGS["amount"]}, REQ, TOOL_DIGEST)
    assert e.value.rule == "HATP-GATE-20"


def test_a_payee_that_is_not_a_non_empty_string_is_refused_under_HATP_GATE_20() -> None:
    for payee in (42, "", None, ["acme"]):
        with pytest.raises(HatpError) as e:
            expected_call(SERVER, "charge_card", {**ARGS, "payee": payee}, REQ, TOOL_DIGEST)
        assert (e.value.rule, e.value.path) == ("HATP-GATE-20", "arguments/payee"), payee
        assert "payee string" in e.value.fix


def test_json_pointers_follow_rfc_6901() -> None:
    doc = {"a/b": {"m~n": [10, 20]}, "": 1}
    assert resolve_pointer(doc, "/a~1b/m~0n/1") == 20
    assert resolve_pointer(doc, "/") == 1
    for bad in ("/a~1b/m~0n/2", "/a~1b/m~0n/01", "/missing", "nope"):
        with pytest.raises(KeyError):
            resolve_pointer(doc, bad)


def test_the_gateway_routes_a_tool_call_without_the_requester_and_checks_the_calls_own_amount() -> None:
    rec, c = ask(call())
    assert c == call()
    asked = [s.human for s in rec.seats if s.status == "asked"]
    assert h("dana") not in asked and len(asked) == 3
    assert rec.checked.amounts == [Amount.of("2500.00", "USD")]
    assert build_tool_call_approval(rec, call(), gateway=GATEWAY_ID, nonce="n" * 16, now=NOW) is None
    with pytest.raises(ValueError):
        build_tool_call_approval(rec, call(tool="other"), gateway=GATEWAY_ID, nonce="n" * 16, now=NOW)


def test_the_gateway_takes_the_amount_from_the_arguments_and_refuses_a_call_the_server_did_not_describe() -> None:
    rec, c = ask(call(), args={**ARGS, "amount": {"value": "9000.00", "currency": "USD"}})
    assert c.max_amount == Amount.of("9000.00", "USD") and rec.checked.amounts == [Amount.of("9000.00", "USD")]
    with pytest.raises(HatpError) as e:
        open_tool_call_ask(
            server=SERVER,
            tool="charge_card",
            arguments={**ARGS, "amount": {"value": "1.00", "currency": "USD"}},
            requirement=REQ,
            tool_digest=TOOL_DIGEST,
            requester=h("dana"),
            directory=directory(),
            gateway=GATEWAY_ID,
            now=NOW,
            call_digest_seen=call_digest(call()),
        )
    assert e.value.rule == "HATP-GATE-7"
    with pytest.raises(HatpError) as e:
        ask(call(), args={"card": "x", "payee": "acme"})
    assert e.value.rule == "HATP-GATE-20"


def test_HATP_GATE_21_an_approval_whose_decisions_carry_no_proof_is_refused() -> None:
    doc = issue()
    bare = [{k: v for k, v in d.items() if k != "proof"} for d in doc["decisions"]]
    e = refused(resigned(doc, decisions=bare))
    assert e.rule == "HATP-GATE-21" and "HATP-GW-27" in e.reason and e.path == "$.decisions[0].proof"


def test_HATP_GATE_21_a_decision_proven_with_another_persons_key_or_for_another_call_is_refused() -> None:
    doc = issue()
    d0, d1 = doc["decisions"]
    carol_for_bob = proof(ask(call())[0].ask, "bob", "approve", NOW + timedelta(minutes=1), key=human_key("carol"))
    e = refused(resigned(doc, decisions=[{**d0, "proof": carol_for_bob}, d1]))
    assert e.rule == "HATP-GATE-21" and "HATP-GW-20" in e.reason
    when = NOW + timedelta(minutes=1)
    other_call = proof(ask(call())[0].ask, "bob", "approve", when, subject="sha256:" + "4" * 64)
    e = refused(resigned(doc, decisions=[{**d0, "proof": other_call}, d1]))
    assert e.rule == "HATP-GATE-21" and "HATP-GW-23" in e.reason


def test_HATP_GATE_21_a_gate_that_knows_no_cards_accepts_no_decision() -> None:
    e = refused(issue(), humans=HumanKeys())
    assert e.rule == "HATP-GATE-21" and "HATP-GW-20" in e.reason


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan"), 10**400])
def test_HATP_OBJ_4_tool_arguments_that_are_not_finite_numbers_have_no_call_digest(bad: object) -> None:
    """A gated call's arguments are digested as they are: NaN or 1e400 never becomes null (HATP-CANON-2)."""
    from hatp_mcp.core.gated_tools.checks import GateRequirement, expected_call
    from hatp_mcp.errors import HatpError

    req = GateRequirement(address="human://acme.com/role/finance-approver", action="payments.charge")
    with pytest.raises(HatpError) as err:
        expected_call("mcp://payments.example/hatp", "charge_card", {"memo": {"n": bad}}, req, None)
    assert (err.value.rule, err.value.path) == ("HATP-CANON-2", "$.memo.n")
    assert expected_call("mcp://payments.example/hatp", "charge_card", {"memo": {"n": None}}, req, None)

"""Approval terms (core/gateway/terms.py): tighten only shrinks, names placed holds that outlast the deadline, and binds
the terms into what the person signs; a refusal leaves the ask as it was."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.gateway.ask_evidence import build_approval, build_vote
from hatp_mcp.core.gateway.machine import AskState, open_approval, state_of, tick
from hatp_mcp.core.gateway.proof import apply_proof, check_decision_proofs, sign_decision, subject_digest
from hatp_mcp.core.gateway.screen import render_ask_text
from hatp_mcp.core.gateway.terms import check_sent_terms, same_terms, tighten
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms, HoldTerm
from hatp_mcp.core.signing.keys import sign_object
from hatp_mcp.errors import HatpError
from tests.acme_org import GATEWAY_ID, directory, gateway_key, h, human_key, human_keys, plan

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
LEASE = "2026-11-29T10:15:00Z"
HORIZON = "2026-11-29T12:00:00Z"
NEW = datetime(2026, 11, 29, 11, 50, tzinfo=UTC)


def held_plan() -> Plan:
    """One hold (a seat) and one payment, approved by one finance approver."""
    doc = plan(["400"], address="human://acme.com/role/finance-approver").wire()
    doc["branches"].insert(
        0,
        {
            "branchId": "seat",
            "participant": "mcp://airline.example/hatp",
            "operation": "seat.hold",
            "tier": "hold",
            "amount": {"value": "600", "currency": "USD"},
            "leaseSeconds": 900,
            "holdHorizonSeconds": 7200,
        },
    )
    return Plan.model_validate(doc)


def opened() -> AskRecord:
    return open_approval(held_plan(), "finance", directory(), gateway=GATEWAY_ID, now=NOW)


def seat(**over: Any) -> HoldTerm:
    return HoldTerm.model_validate({"branchId": "seat", "leaseExpiresAt": LEASE, "holdHorizon": HORIZON} | over)


def signed(rec: AskRecord, name: str, now: datetime, terms: Any) -> dict[str, Any]:
    ask = rec.ask
    key = human_key(name)
    nonce = secrets.token_urlsafe(18)
    return sign_decision(key, ask.ask_id, subject_digest(ask), h(name), "approve", now, nonce=nonce, terms=terms).wire()


def refused(fn: Any, *args: Any) -> HatpError:
    with pytest.raises(HatpError) as exc:
        fn(*args)
    return exc.value


def test_HATP_GW_30_tighten_shrinks_the_deadline_and_the_pending_vote_names_it() -> None:
    rec = opened()
    after = tighten(rec, NEW, [seat()], NOW)
    assert after.ask.decide_by == "2026-11-29T11:50:00Z" and after.ask.screen is not None
    assert after.ask.terms == ApprovalTerms(decide_by="2026-11-29T11:50:00Z", holds=[seat()])
    assert after.ask.screen.decide_by == "2026-11-29T11:50:00Z"
    assert build_vote(after, GATEWAY_ID, NOW).decide_by == "2026-11-29T11:50:00Z"
    assert tighten(after, NEW, [seat()], NOW) == after  # the same terms again change nothing
    # HATP-GW-12 now expires it at the new deadline
    assert state_of(tick(after, NEW)) is AskState.EXPIRED


def test_HATP_GW_30_tighten_never_extends_the_deadline_and_leaves_the_ask_unchanged() -> None:
    rec = opened()
    later = datetime(2026, 11, 29, 14, 0, 1, tzinfo=UTC)
    err = refused(tighten, rec, later, [], NOW)
    assert (err.rule, err.code, err.path) == ("HATP-GW-30", "DEADLINE_EXTENDED", "$.decideBy")
    assert rec == opened() and rec.ask.terms is None


def test_HATP_GW_30_a_closed_ask_cannot_be_tightened() -> None:
    rec = tick(opened(), datetime(2026, 11, 29, 14, 0, tzinfo=UTC))
    err = refused(tighten, rec, NEW, [], datetime(2026, 11, 29, 14, 0, tzinfo=UTC))
    assert (err.rule, err.code) == ("HATP-GW-11", "ASK_CLOSED")


def test_HATP_GW_30_once_someone_decided_the_terms_are_fixed() -> None:
    doc = held_plan().wire()
    doc["approvals"][0]["address"] = "human://acme.com/role/finance-approver?quorum=2-of-3"
    rec = open_approval(Plan.model_validate(doc), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    first = tighten(rec, NEW, [seat()], NOW)
    asked = next(s.human for s in first.seats if s.status == "asked").removeprefix("human://acme.com/")
    one, _ = apply_proof(
        first, signed(first, asked, NOW, first.ask.terms), humans=human_keys(), now=NOW, nonce_used=False
    )
    assert len(one.decisions) == 1 and state_of(one) is AskState.PENDING
    err = refused(tighten, one, NEW - timedelta(minutes=5), [seat()], NOW)
    assert (err.rule, err.code) == ("HATP-GW-30", "TERMS_FIXED")
    assert tighten(one, NEW, [seat()], NOW) == one


def test_HATP_GW_31_holds_must_be_hold_branches_named_once_and_outlast_the_deadline() -> None:
    rec = opened()
    cases = [
        ([seat(branchId="pay0")], "$.holds[0].branchId"),
        ([seat(), seat()], "$.holds[1].branchId"),
        ([seat(holdHorizon="2026-11-29T10:10:00Z")], "$.holds[0].holdHorizon"),
        ([seat(holdHorizon="2026-11-29T11:30:00Z")], "$.decideBy"),
        ([seat(holdHorizon=None)], "$.decideBy"),  # no horizon: the lease (10:15) is its end
    ]
    for holds, path in cases:
        err = refused(tighten, rec, NEW, holds, NOW)
        assert (err.rule, err.code, err.path) == ("HATP-GW-31", "BAD_TERMS", path), holds
    assert rec == opened()


def test_HATP_GW_31_the_approval_screen_shows_the_holds_end_times() -> None:
    after = tighten(opened(), NEW, [seat()], NOW)
    assert after.ask.screen is not None and after.ask.screen.holds == [seat()]
    text = "\n".join(render_ask_text(after.ask))
    assert "hold seat placed: lease ends 2026-11-29T10:15:00Z, kept at most until 2026-11-29T12:00:00Z" in text
    assert "decide by 2026-11-29T11:50:00Z" in text


def test_HATP_GW_32_a_decision_proven_over_other_terms_is_refused_and_counts_nothing() -> None:
    after = tighten(opened(), NEW, [seat()], NOW)
    asked = next(s.human for s in after.seats if s.status == "asked").removeprefix("human://acme.com/")
    other = ApprovalTerms(decide_by=format_ts(NEW), holds=[seat(leaseExpiresAt="2026-11-29T10:14:00Z")])
    for terms in (None, other):
        err = refused(
            lambda t: apply_proof(after, signed(after, asked, NOW, t), humans=human_keys(), now=NOW, nonce_used=False),
            terms,
        )
        assert (err.rule, err.code, err.path) == ("HATP-GW-32", "DECISION_NOT_PROVEN", "$.proof.terms")
    # and a proof carrying terms on an ask without any is refused too
    plain = opened()
    err = refused(
        lambda: apply_proof(
            plain, signed(plain, asked, NOW, after.ask.terms), humans=human_keys(), now=NOW, nonce_used=False
        )
    )
    assert err.rule == "HATP-GW-32"
    ok, _ = apply_proof(
        after, signed(after, asked, NOW, after.ask.terms), humans=human_keys(), now=NOW, nonce_used=False
    )
    assert state_of(ok) is AskState.APPROVED


def test_HATP_GW_32_the_approval_carries_the_terms_and_an_offline_check_refuses_a_proof_over_others() -> None:
    after = tighten(opened(), NEW, [seat()], NOW)
    asked = next(s.human for s in after.seats if s.status == "asked").removeprefix("human://acme.com/")
    ok, _ = apply_proof(
        after, signed(after, asked, NOW, after.ask.terms), humans=human_keys(), now=NOW, nonce_used=False
    )
    approval = build_approval(ok, GATEWAY_ID, "nonce-0123456789abcdef", NOW)
    assert approval is not None and approval.terms == after.ask.terms
    check_decision_proofs(approval, human_keys())
    forged = Approval.model_validate(
        sign_object(
            approval.model_copy(update={"terms": ApprovalTerms(decide_by=format_ts(NEW))}).wire(), gateway_key()
        )
    )
    err = refused(check_decision_proofs, forged, human_keys())
    assert (err.rule, err.path) == ("HATP-GW-32", "$.decisions[0].proof.terms")


def test_HATP_MODE_8_the_coordinator_refuses_an_approval_over_terms_it_did_not_send() -> None:
    after = tighten(opened(), NEW, [seat()], NOW)
    asked = next(s.human for s in after.seats if s.status == "asked").removeprefix("human://acme.com/")
    ok, _ = apply_proof(
        after, signed(after, asked, NOW, after.ask.terms), humans=human_keys(), now=NOW, nonce_used=False
    )
    approval = build_approval(ok, GATEWAY_ID, "nonce-0123456789abcdef", NOW)
    assert approval is not None
    check_sent_terms(approval, after.ask.terms)
    for sent in (None, ApprovalTerms(decide_by="2026-11-29T11:40:00Z", holds=[seat()])):
        err = refused(check_sent_terms, approval, sent)
        assert (err.rule, err.code, err.path) == ("HATP-MODE-8", "TERMS_MISMATCH", "$.approval.terms")
    assert same_terms(None, None) and not same_terms(after.ask.terms, None)


# HATP-GW-97: a refused tighten can be the reason of a signed no vote (terms refused at routing): its times are in
# words, without a countdown that would be wrong when the vote is read later, and never the wire's timestamps
def test_HATP_GW_97_refused_terms_name_the_times_in_words_without_a_countdown() -> None:
    rec = opened()
    reasons = [
        refused(tighten, rec, datetime(2026, 11, 29, 15, 30, tzinfo=UTC), [], NOW).reason,
        refused(tighten, rec, NEW, [seat(holdHorizon="2026-11-29T10:10:00Z")], NOW).reason,
        refused(tighten, rec, NEW, [seat(holdHorizon="2026-11-29T11:30:00Z")], NOW).reason,
    ]
    assert reasons == [
        "the ask's deadline is 2026-11-29 14:00 UTC; tighten never extends it to 2026-11-29 15:30 UTC",
        "hold 'seat' has a horizon 2026-11-29 10:10 UTC before its lease end 2026-11-29 10:15 UTC",
        "the deadline 2026-11-29 11:50 UTC is after hold 'seat' ends (2026-11-29 11:30 UTC)",
    ]

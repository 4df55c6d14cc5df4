"""The gateway's ask state machine: routing, quorum of distinct people, separation of duties, SLA escalation,
deadlines. Every refusal leaves the record it was given unchanged."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from hatp_mcp.core.gateway.ask_evidence import build_approval, build_vote, routing_record
from hatp_mcp.core.gateway.machine import (
    TRANSITIONS,
    AskState,
    Event,
    decide,
    decline,
    next_wakeup,
    open_approval,
    state_of,
    tick,
    transition,
    withdraw,
)
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from tests.acme_org import GATEWAY_ID, directory, h, plan, resigned

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
NONCE = "nonce-0123456789abcdef"


def opened(**kw: object) -> AskRecord:
    amounts = kw.pop("amounts", ["25000"])
    d = kw.pop("dir", None) or directory()
    return open_approval(plan(amounts, **kw), "finance", d, gateway=GATEWAY_ID, now=NOW)  # type: ignore[arg-type]


def test_a_25000_plan_asks_bob_carol_and_frank_and_leaves_the_exclusions_in_the_routing_record() -> None:
    rec = opened()
    rr = routing_record(rec)
    assert [(x.human, x.status, x.rule) for x in rr.humans] == [
        (h("bob"), "asked", None),
        (h("carol"), "asked", None),
        (h("frank"), "asked", None),
        (h("alice"), "excluded", "HATP-GW-4"),
        (h("dana"), "excluded", "HATP-GW-5"),
        (h("erin"), "excluded", "HATP-GW-4"),
    ]
    assert rr.humans[3].detail == "authority: limit $10,000.00 is below $25,000.00"
    assert rr.humans[4].detail == "separation-of-duties: the requester cannot approve their own request"
    assert rr.checked.status == "checked" and rr.checked.amounts[0].value == "25000"
    assert [a.value for a in rr.plan_totals] == ["25000"] and rr.requester == h("dana")
    assert (rec.quorum_required, rec.quorum_of) == (2, 3)


def test_the_pending_vote_carries_the_signed_deadline_under_HATP_GW_12() -> None:
    vote = build_vote(opened(), GATEWAY_ID, NOW)
    assert (vote.decision, vote.decide_by, vote.branch_id, vote.voter) == (
        "pending",
        "2026-11-29T14:00:00Z",
        "finance",
        GATEWAY_ID,
    )


def test_quorum_needs_two_distinct_people_and_then_the_approval_lists_both() -> None:
    rec = decide(opened(), h("bob"), "approve", NOW + timedelta(minutes=5))
    assert state_of(rec) is AskState.PENDING
    rec = decide(rec, h("frank"), "approve", NOW + timedelta(minutes=6))
    assert state_of(rec) is AskState.APPROVED
    appr = build_approval(rec, GATEWAY_ID, NONCE, NOW + timedelta(minutes=6))
    assert appr is not None and appr.decision == "approve"
    assert [d.approver for d in appr.decisions] == [h("bob"), h("frank")]
    assert (appr.quorum.required, appr.quorum.of) == (2, 3)
    assert build_vote(rec, GATEWAY_ID, NOW).decision == "yes"


def test_quorum_met_by_one_person_twice_is_refused_under_HATP_GW_6_and_leaves_the_record_unchanged() -> None:
    rec = decide(opened(), h("bob"), "approve", NOW)
    with pytest.raises(HatpError) as e:
        decide(rec, h("bob"), "approve", NOW + timedelta(seconds=1))
    assert e.value.rule == "HATP-GW-6" and e.value.code == "ALREADY_DECIDED"
    assert state_of(rec) is AskState.PENDING and len(rec.decisions) == 1


def test_self_approval_by_the_requester_is_refused_under_HATP_GW_5() -> None:
    rec = opened()
    with pytest.raises(HatpError) as e:
        decide(rec, h("dana"), "approve", NOW)
    assert e.value.rule == "HATP-GW-5" and "their own request" in e.value.reason
    assert rec.decisions == []


def test_someone_excluded_on_authority_cannot_approve_under_HATP_GW_4() -> None:
    with pytest.raises(HatpError) as e:
        decide(opened(), h("alice"), "approve", NOW)
    assert e.value.rule == "HATP-GW-4"


def test_someone_the_gateway_did_not_ask_cannot_decide_under_HATP_GW_14() -> None:
    with pytest.raises(HatpError) as e:
        decide(opened(), h("mallory"), "approve", NOW)
    assert e.value.rule == "HATP-GW-14"


def test_one_reject_decides_reject_and_the_approval_says_so() -> None:
    rec = decide(decide(opened(), h("bob"), "approve", NOW), h("carol"), "reject", NOW)
    assert state_of(rec) is AskState.REJECTED
    appr = build_approval(rec, GATEWAY_ID, NONCE, NOW)
    assert appr is not None and appr.decision == "reject"
    vote = build_vote(rec, GATEWAY_ID, NOW)
    assert vote.decision == "no" and vote.code == "REJECTED" and h("carol") in (vote.reason or "")


def test_a_decision_after_the_deadline_is_refused_under_HATP_GW_12_and_the_tick_votes_no() -> None:
    rec = opened()
    late = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
    with pytest.raises(HatpError) as e:
        decide(rec, h("bob"), "approve", late)
    assert e.value.rule == "HATP-GW-12" and e.value.code == "DEADLINE_PASSED"
    expired = tick(rec, late)
    assert state_of(expired) is AskState.EXPIRED
    vote = build_vote(expired, GATEWAY_ID, late)
    assert vote.decision == "no" and vote.code == "DEADLINE_PASSED"
    assert build_approval(expired, GATEWAY_ID, NONCE, late) is None
    with pytest.raises(HatpError) as e2:
        decide(expired, h("bob"), "approve", late)
    assert e2.value.rule == "HATP-GW-12"


def test_a_missed_sla_passes_the_ask_to_the_persons_delegate_under_HATP_GW_10() -> None:
    # One approver needed from a person address: frank (SLA 2h) delegates to carol.
    rec = opened(address="human://acme.com/frank")
    assert next_wakeup(rec) == NOW + timedelta(hours=2)
    assert tick(rec, NOW + timedelta(hours=1)) == rec
    rec = tick(rec, NOW + timedelta(hours=2))
    rr = {x.human: x for x in routing_record(rec).humans}
    assert (rr[h("frank")].status, rr[h("frank")].rule) == ("excluded", "HATP-GW-10")
    assert rr[h("frank")].detail is not None and rr[h("frank")].detail.startswith("sla-missed")
    assert rr[h("carol")].status == "asked"
    rec = decide(rec, h("carol"), "approve", NOW + timedelta(hours=2, minutes=1))
    assert state_of(rec) is AskState.APPROVED


def test_a_delegate_without_authority_is_excluded_and_never_takes_over() -> None:
    # frank delegates to erin (limit $500); on a $25,000 plan erin can never take over.
    weak_delegate = resigned("frank", delegates=[h("erin")])
    rec = opened(address="human://acme.com/frank", dir=directory(extra=[weak_delegate], only=["erin", "dana"]))
    rr = {x.human: x for x in routing_record(rec).humans}
    assert rr[h("erin")].status == "excluded" and rr[h("erin")].rule == "HATP-GW-4"
    assert (rr[h("erin")].detail or "").startswith(f"delegate of Frank Fischer ({h('frank')}): ")  # HATP-GW-97
    rec = tick(rec, NOW + timedelta(hours=2))
    assert state_of(rec) is AskState.EXHAUSTED and rec.code == "NO_ELIGIBLE_APPROVER"


def test_too_few_eligible_people_votes_no_at_once_under_HATP_GW_15() -> None:
    rec = opened(address="human://acme.com/alice")
    assert state_of(rec) is AskState.EXHAUSTED
    vote = build_vote(rec, GATEWAY_ID, NOW)
    assert vote.decision == "no" and vote.code == "NO_ELIGIBLE_APPROVER" and "HATP-GW-15" in (vote.reason or "")
    assert routing_record(rec).humans[0].rule == "HATP-GW-4"


def test_declining_passes_the_ask_to_the_next_eligible_person_under_HATP_ASK_5() -> None:
    rec = opened(address="human://acme.com/role/finance-approver")
    asked = [x.human for x in routing_record(rec).humans if x.status == "asked"]
    assert len(asked) == 1
    rec = decline(rec, asked[0], NOW)
    rr = {x.human: x for x in routing_record(rec).humans}
    assert rr[asked[0]].rule == "HATP-ASK-5" and rr[asked[0]].status == "excluded"
    assert sum(1 for x in rr.values() if x.status == "asked") == 1


def test_when_everyone_eligible_declined_the_ask_is_exhausted_and_votes_no_under_HATP_GW_15() -> None:
    rec = opened(address="human://acme.com/role/finance-approver")
    for _ in range(len(routing_record(rec).humans)):
        asked = [x.human for x in routing_record(rec).humans if x.status == "asked"]
        if not asked:
            break
        assert state_of(rec) is AskState.PENDING
        rec = decline(rec, asked[0], NOW)
    assert state_of(rec) is AskState.EXHAUSTED
    vote = build_vote(rec, GATEWAY_ID, NOW)
    assert vote.decision == "no" and vote.code == "NO_ELIGIBLE_APPROVER"
    assert (vote.reason or "").startswith("HATP-GW-15: no eligible person left after")


def test_an_approval_address_must_be_human_under_HATP_ADDR_4() -> None:
    with pytest.raises(HatpError) as e:
        opened(address="agent://acme.com/travel-bot")
    assert e.value.rule == "HATP-ADDR-4" and e.value.path == "approvals[0].address"


def test_open_approval_refuses_a_requirement_below_the_total_and_negative_amounts() -> None:
    with pytest.raises(HatpError) as e:
        opened(max_amount="100")
    assert e.value.rule == "HATP-GW-1"
    with pytest.raises(HatpError) as e:
        opened(amounts=["25000", "-24900"])
    assert e.value.rule == "HATP-GW-2"
    with pytest.raises(HatpError) as e:
        opened(tolerance="-99")
    assert e.value.rule == "HATP-GW-3"


def test_a_plan_that_moves_no_money_says_absent_under_HATP_GW_7() -> None:
    p = plan(["1"])
    doc = p.wire()
    del doc["branches"][0]["amount"]
    rec = open_approval(type(p).model_validate(doc), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    rr = routing_record(rec)
    assert rr.checked.status == "absent" and rr.checked.amounts == [] and rr.plan_totals == []


def test_an_illegal_event_raises_and_the_table_knows_every_pending_event() -> None:
    assert {e for (s, e) in TRANSITIONS if s is AskState.PENDING} == set(Event)
    with pytest.raises(HatpError) as e:
        transition(AskState.APPROVED, Event.APPROVE)
    assert e.value.rule == "HATP-GW-11"


def test_withdrawing_cancels_a_pending_ask_and_keeps_a_decided_one() -> None:
    rec = opened()
    assert state_of(withdraw(rec, NOW)) is AskState.WITHDRAWN
    done = decide(decide(rec, h("bob"), "approve", NOW), h("carol"), "approve", NOW)
    assert withdraw(done, NOW) == done


def test_an_escalation_chain_link_to_an_agent_is_refused_by_the_gateway_under_HATP_ADDR_4() -> None:
    data = plan(["500"]).wire()
    data["approvals"][0]["chain"] = [{"address": "human://acme.com/alice"}, {"address": "agent://acme.com/travel-bot"}]
    with pytest.raises(HatpError) as e:
        open_approval(Plan.model_validate(data), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    assert (e.value.rule, e.value.path) == ("HATP-ADDR-4", "approvals[0].chain[1].address")


def test_HATP_GW_50_branches_that_settle_each_other_still_count_toward_the_total() -> None:
    data = plan(["300", "200"]).wire()
    data["branches"][0]["settles"] = ["pay1"]
    data["branches"][1]["settles"] = ["pay0"]  # a cycle: each says the other pays
    rec = open_approval(Plan.model_validate(data), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    rr = routing_record(rec)
    assert rr.checked.status == "checked"  # never `absent` for a plan that moves money
    assert [(a.value, a.currency) for a in rr.up_to] == [("500", "USD")]
    assert rec.ask.screen is not None and rec.ask.screen.totals == ["$500.00"]


# HATP-GW-97: what the machine writes for a person or a model names people and times as the gateway's other texts do
NAMES = directory().names()  # display names by address, as the gateway has them from the signed cards
WIRE_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def test_HATP_GW_97_a_late_decision_is_refused_naming_the_person_and_the_times_in_words() -> None:
    late = datetime(2026, 11, 29, 14, 5, tzinfo=UTC)
    with pytest.raises(HatpError) as e:
        decide(opened(), h("bob"), "approve", late, names=NAMES)
    assert e.value.reason == (
        "Bob Brown (human://acme.com/bob) decided at 2026-11-29 14:05 UTC, after the signed deadline"
        " 2026-11-29 14:00 UTC (5 min ago); the ask is withdrawn"
    )
    assert (e.value.rule, e.value.code, e.value.path) == ("HATP-GW-12", "DEADLINE_PASSED", "$.decideBy")


def test_HATP_GW_97_a_second_decision_an_excluded_person_and_a_stranger_are_refused_by_name() -> None:
    rec = decide(opened(), h("bob"), "approve", NOW, names=NAMES)
    refusals = {}
    for who in ("bob", "alice", "mallory"):
        with pytest.raises(HatpError) as e:
            decide(rec, h(who), "approve", NOW, names=NAMES)
        refusals[who] = (e.value.rule, e.value.reason)
    assert refusals == {
        "bob": (
            "HATP-GW-6",
            "Bob Brown (human://acme.com/bob) already decided this ask; quorum counts distinct people, once each",
        ),
        "alice": (
            "HATP-GW-4",
            "Alice Adams (human://acme.com/alice) may not decide this ask: authority: limit $10,000.00 is below"
            " $25,000.00",
        ),
        # no card names mallory: the address alone, as HATP-GW-93 writes someone with no card
        "mallory": ("HATP-GW-14", "human://acme.com/mallory was not asked to decide this ask"),
    }


def test_HATP_GW_97_the_no_vote_after_the_deadline_says_the_time_in_words_and_the_wire_fields_stay() -> None:
    rec = opened()
    late = datetime(2026, 11, 29, 14, 3, tzinfo=UTC)
    vote = build_vote(tick(rec, late, NAMES), GATEWAY_ID, late, NAMES)
    # kept in the record and signed: the time alone, never "(3 min ago)" that would be wrong when read later
    assert vote.reason == "HATP-GW-12: no decision by the signed deadline 2026-11-29 14:00 UTC; asks withdrawn"
    assert vote.code == "DEADLINE_PASSED" and vote.issued_at.startswith("2026-11-29T14:03")
    assert build_vote(rec, GATEWAY_ID, NOW, NAMES).decide_by == rec.ask.decide_by == "2026-11-29T14:00:00Z"


def test_HATP_GW_97_no_one_left_names_who_missed_their_time_and_the_seats_say_it_in_words() -> None:
    # frank alone on the cards with the requester: his delegate carol has no card, so no one takes over
    rec = opened(address="human://acme.com/frank", dir=directory(only=["frank", "dana"]))
    gone = tick(rec, NOW + timedelta(hours=2), NAMES)
    rr = {x.human: x for x in routing_record(gone).humans}
    assert rr[h("carol")].detail == "delegate of Frank Fischer (human://acme.com/frank): no card"
    assert rr[h("frank")].detail == "sla-missed: no decision by 2026-11-29 12:00 UTC"
    assert (rr[h("frank")].rule, gone.seats[0].due_at) == ("HATP-GW-10", "2026-11-29T12:00:00Z")  # the wire's own
    vote = build_vote(gone, GATEWAY_ID, NOW + timedelta(hours=2), NAMES)
    assert vote.reason == (
        "HATP-GW-15: no eligible person left after Frank Fischer (human://acme.com/frank) did not decide in their time"
    )
    assert vote.code == "NO_ELIGIBLE_APPROVER"


def test_HATP_GW_97_no_one_left_after_a_pass_and_no_one_eligible_at_all_read_as_people_are_named() -> None:
    rec = opened(address="human://acme.com/frank", dir=directory(only=["frank", "dana"]))
    passed = build_vote(decline(rec, h("frank"), NOW, NAMES), GATEWAY_ID, NOW, NAMES)
    assert (
        passed.reason == "HATP-GW-15: no eligible person left after Frank Fischer (human://acme.com/frank) passed it on"
    )
    alone = build_vote(opened(address="human://acme.com/alice"), GATEWAY_ID, NOW, NAMES)
    assert alone.reason == "HATP-GW-15: 0 eligible of the 1 needed for Alice Adams (human://acme.com/alice)"
    role = build_vote(opened(address="human://acme.com/role/ceo"), GATEWAY_ID, NOW, NAMES)
    assert role.reason == "HATP-GW-15: 0 eligible of the 1 needed for human://acme.com/role/ceo"  # a role as written
    assert not any(WIRE_TIME.search(v.reason or "") for v in (passed, alone, role))

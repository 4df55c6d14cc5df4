"""A record proves its outcome (HATP-REC-10..16): every attack is a record whose chain and signatures are valid
(re-signed with the coordinator's own key) but whose evidence does not justify what it closes with."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import sign_object
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.core.txn.outcome import justify
from hatp_mcp.core.txn.record import Problem, check_record, verify_record
from hatp_mcp.runtime.clock import FakeClock
from tests.factories import signed_trip_record, trip_approval
from tests.records import about, index, keep, rechain
from tests.runtime.coordinator.test_undo_in_doubt import declined_trip
from tests.txn_helpers import drive

pytestmark = pytest.mark.anyio


def rules(problems: list[Problem] | tuple[Problem, ...]) -> set[tuple[int, str]]:
    return {(p.index, p.rule) for p in problems}


def outcome_rules(problems: list[Problem]) -> set[tuple[int, str]]:
    """The problems other than the heads the later answers signed (HATP-REC-20, tests/core/txn/test_anchors.py):
    removing events re-numbers everything after them, so each answer signed at a later head reports it too."""
    ends = ("(a fork)", "events were reordered")
    assert all(p.reason.endswith(ends) for p in problems if p.rule == "HATP-REC-20")
    return {(p.index, p.rule) for p in problems if p.rule != "HATP-REC-20"}


async def produced(clock: FakeClock, *, sold_out: bool = False) -> tuple[dict[str, Any], World]:
    """A record the coordinator runtime really produced (in-process participants, scripted approver)."""
    world = build_world(clock)
    world.room.sold_out = sold_out
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    assert result.outcome is (Outcome.ABORTED if sold_out else Outcome.COMMITTED)
    assert verify_record(result.record, world.keyring) == []
    return result.record, world


async def test_a_record_of_begin_commit_and_close_alone_proves_nothing_HATP_REC_11_HATP_REC_13(
    clock: FakeClock,
) -> None:
    record, world = await produced(clock)
    bare = rechain(
        record,
        keep(record, lambda e: e["event"] in ("txn.begin", "decision", "record.closed")),
        world.keys["coordinator"],
    )
    assert [e["event"] for e in bare["events"]] == ["txn.begin", "decision", "record.closed"]
    problems = verify_record(bare, world.keyring)
    assert {p.rule for p in problems} == {"HATP-REC-11", "HATP-REC-13"}  # the chain itself is sound
    missing = [p.reason for p in problems if p.rule == "HATP-REC-11"]
    assert sum("without a vote of" in r for r in missing) == 4 and any("'finance'" in r for r in missing)
    assert sum(p.rule == "HATP-REC-13" for p in problems) == 4
    assert all(p.index == 1 for p in problems if p.rule == "HATP-REC-11")  # reported at the decision


async def test_the_sold_out_record_re_decided_commit_after_the_hotel_said_no_is_refused_HATP_REC_12(
    clock: FakeClock,
) -> None:
    record, world = await produced(clock, sold_out=True)
    forged = []
    for e in record["events"]:
        if e["event"] == "decision":
            e = {**e, "body": {"decision": "commit", "reason": "every branch and every approver voted yes"}}
        if e["event"] == "record.closed":
            e = {**e, "body": {"outcome": "COMMITTED"}}
        if e["event"] not in ("abort", "approval.withdrawn"):
            forged.append(e)
    bad = rechain(record, forged, world.keys["coordinator"])
    problems = verify_record(bad, world.keyring)
    decided = index(bad, "decision")
    assert (decided, "HATP-REC-12") in rules(problems)
    assert any("room voted no" in p.reason for p in problems if p.rule == "HATP-REC-12")
    assert {p.rule for p in problems} <= {"HATP-REC-11", "HATP-REC-12", "HATP-REC-13"}


async def test_the_committed_record_without_the_gateways_vote_and_approval_is_refused_HATP_REC_11(
    clock: FakeClock,
) -> None:
    record, world = await produced(clock)
    dropped = keep(record, lambda e: about(e) != "finance")
    bad = rechain(record, dropped, world.keys["coordinator"])
    problems = verify_record(bad, world.keyring)
    assert outcome_rules(problems) == {(index(bad, "decision"), "HATP-REC-11")}
    assert "without an answer to approval requirement 'finance'" in problems[0].reason


async def test_a_produced_record_names_its_grounds(clock: FakeClock) -> None:
    record, world = await produced(clock)
    found = check_record(record, world.keyring)
    assert found.outcome == "COMMITTED" and found.problems == ()
    assert found.grounds[0].startswith("every branch voted yes: 4 signed votes")
    assert found.grounds[-1] == "every branch committed: 4 signed commit receipts"
    aborted, world2 = await produced(FakeClock(), sold_out=True)
    found = check_record(aborted, world2.keyring)
    assert found.outcome == "ABORTED" and found.problems == ()
    assert found.grounds[0].startswith("aborted because room voted no (SOLD_OUT), signed by mcp://hotel.example/hatp")


def test_HATP_REC_10_an_outcome_that_does_not_follow_the_last_decision_is_refused() -> None:
    record, ring, keys = signed_trip_record(outcome="ABORTED")
    assert (16, "HATP-REC-10") in rules(verify_record(record, ring))
    odd, ring, keys = signed_trip_record(outcome="DONE")
    assert any(p.rule == "HATP-REC-10" and "'DONE'" in p.reason for p in verify_record(odd, ring))
    # a decision after the abort: abort is final
    again, ring, keys = signed_trip_record()
    events = again["events"]
    abort = {**events[11], "body": {"decision": "abort", "reason": "ABORT_REQUESTED: x"}}
    requested = {**events[11], "event": "abort.requested", "body": {"reason": "x", "by": "agent://acme.com/b"}}
    bad = rechain(again, [*events[:11], requested, abort, *events[11:]], keys["coordinator"])
    assert (13, "HATP-REC-10") in rules(verify_record(bad, ring))


def test_HATP_REC_11_a_vote_signed_by_another_participants_key_does_not_count() -> None:
    record, ring, keys = signed_trip_record()
    ev = copy.deepcopy(record["events"][1])  # the seat's vote, signed by the airline
    ev["evidence"] = sign_object({k: v for k, v in ev["evidence"].items() if k != "signature"}, keys["hotel"])
    bad = rechain(record, [*record["events"][:1], ev, *record["events"][2:]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert (11, "HATP-REC-11") in rules(problems)
    assert any("seat's vote at event 1 does not count: HATP-TXN-2" in p.reason for p in problems)


def test_HATP_REC_11_an_approval_that_expired_before_the_commit_decision_does_not_count() -> None:
    record, ring, keys = signed_trip_record()
    ev = copy.deepcopy(record["events"][10])
    body = {k: v for k, v in ev["evidence"].items() if k != "signature"}
    ev["evidence"] = sign_object({**body, "expiresAt": "2026-11-29T10:05:00Z"}, keys["gateway"])  # decided 10:05:01
    bad = rechain(record, [*record["events"][:10], ev, *record["events"][11:]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert rules(problems) == {(11, "HATP-REC-11")}
    assert "expired" in problems[0].reason


def test_HATP_REC_12_a_cost_above_the_bound_or_the_agents_abort_before_the_commit_contradicts_it() -> None:
    record, ring, keys = signed_trip_record()
    ev = copy.deepcopy(record["events"][8])  # the payment's prepare receipt
    body = {k: v for k, v in ev["evidence"].items() if k != "signature"}
    cost = {"value": "1500.00", "currency": "USD"}  # above 1000.00 + 2%
    ev["evidence"] = sign_object({**body, "reportedCost": cost}, keys["payments"])
    bad = rechain(record, [*record["events"][:8], ev, *record["events"][9:]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert rules(problems) == {(11, "HATP-REC-12")} and "HATP-TXN-14" in problems[0].reason
    asked = {**record["events"][9], "event": "abort.requested", "body": {"reason": "x", "by": "agent://a.com/b"}}
    asked.pop("evidence")
    bad = rechain(record, [*record["events"][:9], asked, *record["events"][9:]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert rules(problems) == {(12, "HATP-REC-12")} and "the agent's request to abort" in problems[0].reason


def test_HATP_REC_13_a_committed_record_needs_every_commit_receipt_and_nothing_undone() -> None:
    record, ring, keys = signed_trip_record()
    cut = rechain(record, [e for i, e in enumerate(record["events"]) if i != 13], keys["coordinator"])
    problems = verify_record(cut, ring)
    assert rules(problems) == {(15, "HATP-REC-13")} and "pay's commit receipt" in problems[0].reason
    undo = copy.deepcopy(record["events"][12])  # the calendar event's commit receipt, made a compensation
    body = {k: v for k, v in undo["evidence"].items() if k != "signature"}
    undo["evidence"] = sign_object({**body, "phase": "compensate"}, keys["calendar"])
    undo["event"] = "compensate"
    bad = rechain(record, [*record["events"][:16], undo, record["events"][16]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert rules(problems) == {(17, "HATP-REC-13")} and "event was undone" in problems[0].reason


def test_HATP_REC_14_an_abort_without_a_reason_is_refused_and_a_forged_no_is_no_reason() -> None:
    record, ring, keys = signed_trip_record(outcome="ABORTED")
    begin = record["events"][0]
    decide = {**record["events"][11], "body": {"decision": "abort", "reason": "VOTED_NO: room voted no"}}
    bare = rechain(record, [begin, decide, record["events"][16]], keys["coordinator"])
    problems = verify_record(bare, ring)
    assert rules(problems) == {(1, "HATP-REC-14")}
    # the hotel's "no", signed by the airline's key: not the room's participant, so it justifies nothing
    no = copy.deepcopy(record["events"][3])
    body = {k: v for k, v in no["evidence"].items() if k != "signature"}
    no["evidence"] = sign_object({**body, "decision": "no", "voter": "mcp://airline.example/hatp"}, keys["participant"])
    forged = rechain(record, [begin, no, decide, record["events"][16]], keys["coordinator"])
    assert (2, "HATP-REC-14") in rules(verify_record(forged, ring))


async def test_HATP_REC_15_an_aborted_record_whose_seat_was_never_released_is_refused(clock: FakeClock) -> None:
    record, world = await produced(clock, sold_out=True)
    kept = keep(record, lambda e: not (e["event"] == "abort" and about(e) == "seat"))
    bad = rechain(record, kept, world.keys["coordinator"])
    problems = verify_record(bad, world.keyring)
    assert outcome_rules(problems) == {(len(kept) - 1, "HATP-REC-15")}
    assert "seat voted yes and was never released" in next(p.reason for p in problems if p.rule == "HATP-REC-15")


def test_HATP_REC_15_an_aborted_record_whose_final_step_committed_is_refused() -> None:
    record, ring, keys = signed_trip_record(outcome="ABORTED")
    events = record["events"]
    asked = {**events[11], "event": "abort.requested", "body": {"reason": "x", "by": "agent://acme.com/b"}}
    abort = {**events[11], "body": {"decision": "abort", "reason": "ABORT_REQUESTED: x"}}
    # begin, the votes, the pay's commit, then an abort: the capture cannot be undone
    bad = rechain(record, [*events[:11], events[13], asked, abort, events[16]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert any(p.rule == "HATP-REC-15" and "pay (final) committed" in p.reason for p in problems)


async def test_HATP_TXN_32_an_aborted_record_whose_undo_stayed_in_doubt_is_refused(clock: FakeClock) -> None:
    # the coordinator stopped sending the calendar's undo at its bound and closed NEEDS_RECOVERY; re-closed ABORTED
    result, world, _coord = await declined_trip(clock, 99)
    record = result.record
    assert result.outcome is Outcome.NEEDS_RECOVERY and verify_record(record, world.keyring) == []
    events = [e for e in record["events"] if e["event"] != "recovery.offered"]
    closed = {**events[-1], "body": {**events[-1]["body"], "outcome": "ABORTED"}}
    bad = rechain(record, [*events[:-1], closed], world.keys["coordinator"])
    problems = verify_record(bad, world.keyring)
    assert (len(events) - 1, "HATP-TXN-32") in outcome_rules(problems)
    assert "event's undo is in doubt since event" in next(p.reason for p in problems if p.rule == "HATP-TXN-32")


async def test_HATP_TXN_32_an_undo_in_doubt_after_its_ok_is_refused_where_every_branch_looks_released(
    clock: FakeClock,
) -> None:
    result, world, _coord = await declined_trip(clock, 1)  # in doubt, then ok: ABORTED, and it verifies
    record = result.record
    assert result.outcome is Outcome.ABORTED and verify_record(record, world.keyring) == []
    doubt, ok = (i for i, e in enumerate(record["events"]) if e["event"] == "compensate")
    events = list(record["events"])
    # the last word on the undo is now "in doubt" (each at the other's time: times never go backwards, HATP-REC-9)
    events[doubt], events[ok] = (
        {**events[ok], "at": events[doubt]["at"]},
        {**events[doubt], "at": events[ok]["at"]},
    )
    bad = rechain(record, events, world.keys["coordinator"])
    assert outcome_rules(verify_record(bad, world.keyring)) == {(len(events) - 1, "HATP-TXN-32")}  # REC-15 passes


def test_HATP_REC_16_needs_recovery_must_name_what_is_left() -> None:
    record, ring, _keys = signed_trip_record(outcome="NEEDS_RECOVERY")
    problems = verify_record(record, ring)
    assert rules(problems) == {(16, "HATP-REC-16")}


def test_justify_is_the_same_check_without_the_close() -> None:
    record, ring, _keys = signed_trip_record()
    plan = Plan.model_validate(record["plan"])
    events = record["events"][:-1]
    assert justify(plan, plan.digest(), events, "COMMITTED", ring).problems == ()
    assert {p.rule for p in justify(plan, plan.digest(), events, "ABORTED", ring).problems} == {"HATP-REC-10"}


def test_HATP_REC_11_an_approval_without_the_terms_the_gateway_accepted_does_not_count_HATP_MODE_8() -> None:
    record, ring, keys = signed_trip_record()
    events = record["events"]
    terms = {
        **events[9],
        "event": "approval.terms",
        "body": {"requirementId": "finance", "terms": {"decideBy": "2026-11-29T10:30:00Z"}},
    }
    terms.pop("evidence")
    bad = rechain(record, [*events[:9], terms, *events[9:]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert rules(problems) == {(12, "HATP-REC-11")} and "HATP-MODE-8" in problems[0].reason


_junk = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None)
@given(i=st.integers(0, 15), where=st.sampled_from(["body", "evidence", "event", "at"]), junk=_junk)
def test_justify_never_raises_on_a_mangled_event(i: int, where: str, junk: Any) -> None:
    record, ring, _keys = signed_trip_record()
    plan = Plan.model_validate(record["plan"])
    events = copy.deepcopy(record["events"][:-1])
    if where in ("body", "evidence") and isinstance(junk, dict):
        events[i][where] = {**events[i].get(where, {}), **junk, "branchId": junk}
    else:
        events[i][where] = junk
    found = justify(plan, plan.digest(), events, "COMMITTED", ring)
    assert isinstance(found.problems, tuple)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"approver": "human://acme.com/dana"}, "HATP-TXN-20"),  # the requester approved her own agent's plan
        ({"twice": True}, "distinct"),  # one person counted twice toward a quorum of two
    ],
)
def test_HATP_REC_11_an_approval_that_does_not_meet_its_requirement_proves_no_commit(
    change: dict[str, Any], needle: str
) -> None:
    record, ring, keys = signed_trip_record()
    plan = Plan.model_validate(record["plan"])
    approval = trip_approval(plan, plan.digest(), keys["gateway"], change.get("approver", "human://acme.com/alice"))
    if change.get("twice"):
        body = {k: v for k, v in approval.items() if k != "signature"}
        body["decisions"] = [body["decisions"][0], body["decisions"][0]]
        body["quorum"] = {"required": 2, "of": 3}
        approval = sign_object(body, keys["gateway"])
    ev = {**record["events"][10], "evidence": approval}
    bad = rechain(record, [*record["events"][:10], ev, *record["events"][11:]], keys["coordinator"])
    problems = verify_record(bad, ring)
    assert rules(problems) == {(11, "HATP-REC-11")}
    assert needle in problems[0].reason


async def test_HATP_TXN_29_the_told_outcome_must_follow_the_irreversible_commit_and_is_never_contradicted(
    clock: FakeClock,
) -> None:
    record, world = await produced(clock)
    coordinator = world.keys["coordinator"]
    events = record["events"]
    told = index(record, "outcome.decided")
    pay = next(i for i, e in enumerate(events) if e["event"] == "commit" and about(e) == "pay")
    assert pay < told and verify_record(record, world.keyring) == []
    early = [e for i, e in enumerate(events) if i != told]
    early.insert(pay, events[told])  # told before the payment (the final branch) committed
    problems = verify_record(rechain(record, early, coordinator), world.keyring)
    assert (pay, "HATP-TXN-29") in outcome_rules(problems)
    twice = [*events[: told + 1], events[told], *events[told + 1 :]]
    problems = verify_record(rechain(record, twice, coordinator), world.keyring)
    assert (told + 1, "HATP-TXN-29") in outcome_rules(problems)
    plan = Plan.model_validate(record["plan"])
    aborted = justify(plan, plan.digest(), events[:-1], "ABORTED", world.keyring)
    assert any(p.rule == "HATP-TXN-29" and "after telling the agent COMMITTED" in p.reason for p in aborted.problems)

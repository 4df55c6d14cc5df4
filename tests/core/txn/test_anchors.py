"""Record anchoring (spec/hatp.md HATP-REC-19..22): the heads the participants sign catch a record the coordinator
cut or rewrote and signed again with its own key, which nothing inside that copy can show. The records here are
real: the in-memory trip (demo/trip_world.py) run by the coordinator runtime, whose participants sign heads."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from demo.trip_world import AIRLINE, World, build_world, trip_plan
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.core.txn.anchors import AnchorStatus, off_record
from hatp_mcp.core.txn.record import check_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.participant.driver import kept_evidence
from tests.factories import signed_trip_record
from tests.records import index, rechain
from tests.txn_helpers import drive

pytestmark = pytest.mark.anyio

TXN = "txn-anchor-1"


async def committed(clock: FakeClock) -> tuple[World, dict[str, Any], list[dict[str, Any]]]:
    """The committed trip: (world, its record, every participant's own kept votes and receipts)."""
    world = build_world(clock)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now(), TXN)))
    assert result.record["events"][-1]["body"]["outcome"] == "COMMITTED"
    outside = [item for p in world.participants.values() for item in kept_evidence(p.store, TXN)]
    return world, result.record, outside


def truncated_to_an_abort(record: dict[str, Any], key: SigningKey) -> dict[str, Any]:
    """The planted violation: the committed record cut back to its begin event, then an agent's abort appended,
    decided and closed, all signed again with the coordinator's own key: a valid chain proving a valid ABORTED."""
    begin = record["events"][0]
    at, author = begin["at"], begin["author"]
    events = [
        begin,
        {"event": "abort.requested", "at": at, "author": author, "body": {"reason": "the agent changed its mind"}},
        {"event": "decision", "at": at, "author": author, "body": {"decision": "abort", "reason": "abort.requested"}},
        {"event": "record.closed", "at": at, "author": author, "body": {"outcome": "ABORTED"}},
    ]
    return rechain(record, events, key)


def resign(evidence: dict[str, Any], key: SigningKey, **changes: Any) -> dict[str, Any]:
    return sign_object({**{k: v for k, v in evidence.items() if k != "signature"}, **changes}, key)


async def test_HATP_REC_19_every_answer_signs_the_head_it_answered_at(clock: FakeClock) -> None:
    world, record, outside = await committed(clock)
    events = record["events"]
    decision = index(record, "decision")
    signed = [(k, e["evidence"]) for k, e in enumerate(events) if e.get("evidence", {}).get("type") == "hatp.receipt"]
    assert len(signed) == 8  # four prepare receipts, four commit receipts
    for k, receipt in signed:
        head = receipt["recordHead"]
        assert head["seq"] < k and head["digest"] == digest(events[head["seq"]])  # a durable head of this record
        if receipt["phase"] == "commit":  # a commit answers at the decision it carried out, computed by itself
            assert head["seq"] == decision
    found = check_record(record, world.keyring, evidence=outside)
    assert found.problems == ()
    assert found.anchoring is not None and found.anchoring.status is AnchorStatus.CHECKED
    assert (found.anchoring.outside, found.anchoring.outside_heads) == (12, 12)  # 4 x (vote, prepare, commit)
    assert found.anchoring.pinned_to == decision
    assert "their heads pin events 0..12" in found.anchoring.summary()


async def test_HATP_REC_21_a_truncated_record_re_signed_with_the_coordinators_key_is_caught_by_the_receipts(
    clock: FakeClock,
) -> None:
    world, record, outside = await committed(clock)
    forged = truncated_to_an_abort(record, world.keys["coordinator"])
    alone = check_record(forged, world.keyring)
    # what HATP-REC-6 says: alone, the forged copy holds, and the verifier says it is not anchored, never "verified"
    assert alone.problems == () and alone.outcome == "ABORTED"
    assert alone.anchoring is not None and alone.anchoring.status is AnchorStatus.NONE
    assert alone.anchoring.summary().startswith("not anchored: no party signed a head of this record")
    found = check_record(forged, world.keyring, evidence=outside)
    assert found.problems and {p.rule for p in found.problems} == {"HATP-REC-21"}
    commits = [p for p in found.problems if "commit receipt (ok)" in p.reason]
    assert len(commits) == 4
    assert commits[0].index == -1 and commits[0].reason.endswith(
        "was signed at head 12, but this record ends at event 3: the record was cut after the party answered"
    )
    # the prepare answers were signed at head 1, which the forged copy replaced: a fork at event 1
    forks = [p for p in found.problems if p.reason.endswith("the chain was rewritten at or before it (a fork)")]
    assert len(forks) == 8 and {p.index for p in forks} == {1}


async def test_HATP_REC_21_a_forked_head_is_caught_even_when_the_record_keeps_its_length(clock: FakeClock) -> None:
    world, record, outside = await committed(clock)
    events = copy.deepcopy(record["events"])
    decision = index(record, "decision")
    events[decision]["body"]["reason"] = "approved by the board"  # same length, same outcome, another event 12
    forged = rechain(record, events, world.keys["coordinator"])
    found = check_record(forged, world.keyring, evidence=outside)
    # the commit receipts inside the copy were signed at the real event 12 (HATP-REC-20) ...
    inside = [p for p in found.problems if p.rule == "HATP-REC-20"]
    assert len(inside) == 4 and all(
        p.reason.endswith("the chain was rewritten before the party answered (a fork)") for p in inside
    )
    # ... and the parties' own copies are held by the record, so they add nothing the copy does not already show
    assert not [p for p in found.problems if p.rule == "HATP-REC-21"]


async def test_HATP_REC_20_an_answer_placed_before_the_head_it_was_signed_at_is_reordered(clock: FakeClock) -> None:
    world, record, _ = await committed(clock)
    events = list(record["events"])
    decision = index(record, "decision")
    first_commit = events.pop(decision + 1)
    events.insert(decision - 1, first_commit)  # the commit receipt moved before the decision it carried out
    forged = rechain(record, events, world.keys["coordinator"])
    found = check_record(forged, world.keyring)
    reordered = [p for p in found.problems if p.rule == "HATP-REC-20"]
    assert reordered and reordered[0].index == decision - 1
    assert reordered[0].reason.endswith("before that head: events were reordered")


async def test_HATP_REC_20_a_commit_receipt_anchored_elsewhere_than_the_commit_decision_is_refused(
    clock: FakeClock,
) -> None:
    world, record, _ = await committed(clock)
    events = copy.deepcopy(record["events"])
    k = next(i for i, e in enumerate(events) if e["event"] == "commit" and e["author"] == AIRLINE)
    vote_at = next(i for i, e in enumerate(events) if e["event"] == "vote" and e["author"] == AIRLINE)
    head = {"seq": vote_at, "digest": digest(events[vote_at])}
    events[k]["evidence"] = resign(events[k]["evidence"], world.keys["airline"], recordHead=head)
    forged = rechain(record, events, world.keys["coordinator"])
    found = check_record(forged, world.keyring)
    assert [(p.index, p.rule) for p in found.problems] == [(k, "HATP-REC-20")]
    assert found.problems[0].reason.endswith(
        f"is anchored at event {vote_at}, which is not the commit decision a commit carries out"
    )


async def test_HATP_REC_21_outside_evidence_counts_only_as_a_bound_partys_answer_about_this_plan(
    clock: FakeClock,
) -> None:
    world, record, outside = await committed(clock)
    airline_commit = next(e for e in outside if e.get("phase") == "commit" and e["participant"] == AIRLINE)
    other_plan = resign(airline_commit, world.keys["airline"], planDigest="sha256:" + "0" * 64)
    by_hotel = resign(airline_commit, world.keys["hotel"])  # the airline's receipt signed with the hotel's key
    other_txn = resign(airline_commit, world.keys["airline"], txnId="txn-other")
    approval = next(e["evidence"] for e in record["events"] if e["event"] == "approval")
    found = check_record(record, world.keyring, evidence=[other_plan, by_hotel, other_txn, approval, "x"])
    reasons = [p.reason for p in found.problems]
    assert {p.rule for p in found.problems} == {"HATP-REC-21"} and len(reasons) == 5
    assert reasons[0].endswith("the party was shown another record for this transaction (a fork)")
    assert reasons[1] == (
        "outside[1]: HATP-SIG-6: key 'hotel-1' speaks for mcp://hotel.example/hatp, not for "
        "'mcp://airline.example/hatp'"
    )
    assert reasons[2] == "outside[2] is about transaction 'txn-other', not this record's 'txn-anchor-1'"
    assert reasons[3] == "outside[3] is a 'hatp.approval', not a party's signed vote or receipt"
    assert reasons[4] == "outside[4] is not a signed vote or receipt"
    assert found.anchoring is not None and found.anchoring.outside == 0  # none of them was counted as checked


async def test_HATP_REC_21_a_closed_record_that_leaves_out_a_partys_answer_is_refused(clock: FakeClock) -> None:
    world, record, outside = await committed(clock)
    dropped = index(record, "commit")
    events = [e for i, e in enumerate(record["events"]) if i != dropped]
    forged = rechain(record, events, world.keys["coordinator"])
    found = check_record(forged, world.keyring, evidence=outside)
    left_out = [p for p in found.problems if p.rule == "HATP-REC-21"]
    assert len(left_out) == 1 and "the record leaves out" in left_out[0].reason
    assert "commit receipt (ok)" in left_out[0].reason


async def test_HATP_REC_22_an_open_copy_older_than_an_answer_settles_nothing_past_its_end(clock: FakeClock) -> None:
    world, record, outside = await committed(clock)
    decision = index(record, "decision")
    older = {**record, "events": record["events"][: decision + 1]}  # a copy taken at the decision
    found = check_record(older, world.keyring, require_closed=False, evidence=outside)
    assert found.problems == ()
    assert found.anchoring is not None and found.anchoring.beyond == 4  # the four commit receipts
    assert "4 lie past the end of this open copy and were not settled" in found.anchoring.summary()


def test_HATP_REC_22_a_record_without_heads_still_verifies_and_says_it_is_not_anchored() -> None:
    record, ring, _ = signed_trip_record()  # its participants sign no heads, as before anchoring
    found = check_record(record, ring)
    assert found.problems == ()
    assert found.anchoring is not None and found.anchoring.status is AnchorStatus.NONE
    assert (found.anchoring.inside_heads, found.anchoring.pinned_to) == (0, None)


async def test_HATP_REC_22_heads_inside_the_record_alone_are_not_called_checked(clock: FakeClock) -> None:
    world, record, _ = await committed(clock)
    found = check_record(record, world.keyring)
    assert found.anchoring is not None and found.anchoring.status is AnchorStatus.INTERNAL
    assert found.anchoring.inside_heads == 12  # 4 x (vote, prepare receipt, commit receipt)
    assert "a shortened, re-signed record would pass (pass --evidence)" in found.anchoring.summary()


async def test_HATP_REC_21_a_lost_vote_is_counted_as_not_recorded_but_a_left_out_commit_receipt_is_refused(
    clock: FakeClock,
) -> None:
    world, record, outside = await committed(clock)
    vote = next(e for e in outside if e["type"] == "hatp.vote" and e["voter"] == AIRLINE)
    commit = next(e for e in outside if e.get("phase") == "commit" and e["participant"] == AIRLINE)
    # answers the record never got (a prepare answered twice, the first answer lost), their heads holding
    lost_vote = resign(vote, world.keys["airline"], issuedAt="2026-11-29T10:00:01Z")
    found = check_record(record, world.keyring, evidence=[*outside, lost_vote])
    assert found.problems == ()  # an answer can honestly be lost, and a dropped vote only allows an abort
    assert found.anchoring is not None and found.anchoring.unrecorded == 1
    assert "1 vote(s) or receipt(s) are not in the record" in found.anchoring.summary()
    other_commit = resign(commit, world.keys["airline"], issuedAt="2026-11-29T10:00:02Z")
    found = check_record(record, world.keyring, evidence=[other_commit])
    assert [(p.index, p.rule) for p in found.problems] == [(-1, "HATP-REC-21")]
    assert found.problems[0].reason.endswith("either way it does not show what this party did")


@pytest.mark.parametrize(
    "head",
    [{"seq": -1, "digest": "sha256:" + "0" * 64}, {"seq": 1}, {"seq": True, "digest": "x"}, [1], "head"],
)
async def test_HATP_REC_20_a_head_that_cannot_be_checked_is_refused_never_taken_for_no_head(
    clock: FakeClock, head: Any
) -> None:
    world, record, outside = await committed(clock)
    events = copy.deepcopy(record["events"])
    k = index(record, "commit")
    events[k]["evidence"] = resign(events[k]["evidence"], world.keys[_name(events[k]["author"])], recordHead=head)
    forged = rechain(record, events, world.keys["coordinator"])
    found = check_record(forged, world.keyring)
    anchored = [p for p in found.problems if p.rule == "HATP-REC-20"]
    assert [p.index for p in anchored] == [k]
    assert "is not {seq: 0..1000000, digest: sha256:<64 hex>}" in anchored[0].reason
    # the receipt does not parse, so it is no commit receipt either: the outcome rule says the commit is unproven
    assert {p.rule for p in found.problems} == {"HATP-REC-20", "HATP-REC-13"}
    bad = resign(outside[0], world.keys["airline"], recordHead=head)  # outside[0]: the airline's vote
    found = check_record(record, world.keyring, evidence=[bad])
    assert [(p.index, p.rule) for p in found.problems] == [(-1, "HATP-REC-21")]


def _name(party: str) -> str:
    """The trip world's key name for a participant URI (mcp://airline.example/hatp -> airline)."""
    return party.split("//")[1].split(".")[0]


def test_HATP_REC_20_an_answer_is_off_the_record_when_its_head_is_not_one_of_its_events_or_no_head_at_all() -> None:
    """As an answer arrives (the coordinator's driver, HATP-TXN-27): a head this record holds passes, a head of
    another chain or past its end is refused, and so is one of the wrong shape (never taken for no head)."""
    here = "sha256:" + "a" * 64
    digests = {0: "sha256:" + "0" * 64, 1: here}
    vote = {"type": "hatp.vote", "voter": AIRLINE, "branchId": "seat", "decision": "yes"}
    assert off_record({**vote, "recordHead": {"seq": 1, "digest": here}}, digests.get) is None
    assert off_record(vote, digests.get) is None  # no head: what the head rules say of that is not this check's
    refused = [
        {"seq": 1, "digest": "sha256:" + "b" * 64},  # a fork: another chain's event 1
        {"seq": 2, "digest": here},  # past the end
        {"seq": "1", "digest": here},  # not a head
        {"seq": 1, "digest": here, "extra": 1},
        {"seq": -1, "digest": here},
        [1, here],
    ]
    for head in refused:
        reason = off_record({**vote, "recordHead": head}, digests.get)
        assert reason is not None and reason.startswith("HATP-REC-20"), head

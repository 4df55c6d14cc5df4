"""The coordinator's answer about a transaction, derived from its logged record and decision (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from demo.trip_world import trip_plan
from hatp_mcp.core.txn.status import summarize

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def ev(event: str, body: dict[str, Any] | None = None, evidence: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"event": event, "body": body or {}}
    if evidence is not None:
        out["evidence"] = evidence
    return out


def vote(branch: str, decision: str, voter: str = "mcp://x") -> dict[str, Any]:
    return ev("vote", {"branchId": branch}, {"type": "hatp.vote", "voter": voter, "decision": decision})


def test_an_undecided_transaction_with_votes_missing_is_preparing_and_lists_the_votes_so_far() -> None:
    plan = trip_plan(NOW)
    status = summarize(plan, [ev("txn.begin", {"mode": "parallel"}), vote("seat", "yes")], None)
    assert status.state == "preparing"
    assert [(v.branch_id, v.decision) for v in status.votes] == [("seat", "yes")]
    assert status.outcome is None and status.record is None and status.event_count == 2


def test_every_branch_voted_and_no_decision_is_approving_and_the_latest_vote_counts() -> None:
    plan = trip_plan(NOW)
    events = [ev("txn.begin", {"mode": "parallel"}), vote("finance", "pending")]
    events += [vote(b.branch_id, "yes") for b in plan.branches] + [vote("finance", "yes")]
    status = summarize(plan, events, None)
    assert status.state == "approving"
    assert {v.branch_id: v.decision for v in status.votes}["finance"] == "yes"


def test_approval_first_without_quotes_is_quoting() -> None:
    assert summarize(trip_plan(NOW), [ev("txn.begin", {"mode": "approval-first"})], None).state == "quoting"


def test_a_commit_decision_is_committing_until_a_commit_times_out_then_in_doubt_until_it_answers() -> None:
    plan = trip_plan(NOW)
    events = [ev("txn.begin"), ev("decision", {"decision": "commit"})]
    assert summarize(plan, events, "commit").state == "committing"
    events.append(ev("commit.in-doubt", {"branchId": "pay"}))
    assert summarize(plan, events, "commit").state == "in-doubt"
    events.append(ev("commit", {"branchId": "pay"}))
    assert summarize(plan, events, "commit").state == "committing"


def test_a_closed_record_gives_its_outcome_and_the_record_whole() -> None:
    plan = trip_plan(NOW)
    events = [ev("txn.begin"), ev("decision"), ev("record.closed", {"outcome": "ABORTED"})]
    status = summarize(plan, events, "abort", {"type": "hatp.record", "events": events})
    assert (status.state, status.outcome, status.decision) == ("aborted", "ABORTED", "abort")
    assert status.record is not None and status.record["events"] == events


def test_an_open_record_never_carries_the_record_and_an_empty_log_is_new() -> None:
    plan = trip_plan(NOW)
    assert summarize(plan, [ev("txn.begin")], None, {"events": []}).record is None
    assert summarize(plan, [], None).state == "new"


def test_HATP_TXN_31_an_undo_in_doubt_is_never_said_released_or_undone() -> None:
    plan = trip_plan(NOW)

    def undo(event: str, branch: str, outcome: str) -> dict[str, Any]:
        return ev(event, {"branchId": branch}, {"type": "hatp.receipt", "phase": event, "outcome": outcome})

    events = [ev("txn.begin"), ev("decision", {"decision": "abort"})]
    events += [undo("abort", "seat", "in-doubt"), undo("abort", "room", "in-doubt"), undo("abort", "room", "ok")]
    events += [undo("compensate", "event", "in-doubt"), undo("compensate", "pay", "ok")]
    events += [ev("undo.in-doubt", {"branchId": "seat", "phase": "abort", "attempts": 10})]
    events += [ev("record.closed", {"outcome": "NEEDS_RECOVERY"})]
    said = {r.branch_id: r.result for r in summarize(plan, events, "abort").results}
    assert said["seat"] == "in-doubt" and said["event"] == "in-doubt"  # what may not have happened
    assert said["room"] == "released" and said["pay"] == "undone"  # the signed ok after the doubt settles it

"""core/validate/validator.py: every HATP-VAL rule refuses a plan that breaks it, naming the rule, path and fix."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.core.model.example_plan import trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.validator import detect_kind, plan_violations, validate, validate_document
from hatp_mcp.core.validate.violation import Violation

TRIP = Path(__file__).resolve().parents[3] / "spec" / "fixtures" / "hatp" / "trip.valid.json"
NOW = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


def trip() -> dict[str, Any]:
    return copy.deepcopy(json.loads(TRIP.read_text()))


def branch(plan: dict[str, Any], branch_id: str) -> dict[str, Any]:
    return next(b for b in plan["branches"] if b["branchId"] == branch_id)


def check(plan: dict[str, Any], now: datetime = NOW) -> list[Violation]:
    return validate(Plan.model_validate(plan), now)


def rules_and_paths(violations: list[Violation]) -> list[tuple[str, str]]:
    return [(v.rule, v.path) for v in violations]


def test_the_trip_plan_is_valid_and_validate_returns_no_violations() -> None:
    assert check(trip()) == []


def test_a_plan_that_does_not_match_the_schema_reports_schema_violations_only_HATP_VAL_1() -> None:
    plan = trip()
    branch(plan, "seat")["priority"] = 1
    branch(plan, "room")["amount"]["value"] = 567.0
    branch(plan, "calendar")["tier"] = "final"  # a HATP-VAL-3 break that must stay unreported
    report = validate_document(plan, NOW)
    assert report.kind == "hatp" and not report.ok
    assert rules_and_paths(report.violations) == [
        ("schema", "branches[0].priority"),
        ("schema", "branches[1].amount.value"),
    ]
    assert "decimal string" in report.violations[1].message


def test_a_reused_branch_id_is_refused_HATP_VAL_2() -> None:
    plan = trip()
    extra = copy.deepcopy(branch(plan, "calendar"))
    plan["branches"].insert(3, extra)
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-2", "branches[3].branchId")]
    assert '"calendar"' in out[0].message and "branches[2]" in out[0].message


def test_a_reused_approval_id_is_refused_HATP_VAL_2() -> None:
    plan = trip()
    plan["approvals"].append(copy.deepcopy(plan["approvals"][0]))
    assert rules_and_paths(check(plan)) == [("HATP-VAL-2", "approvals[1].id")]


def test_a_second_final_branch_is_refused_as_not_last_resource_HATP_VAL_3() -> None:
    plan = trip()
    plan["branches"].append(
        {
            "branchId": "points",
            "participant": "p",
            "operation": "loyalty.redeem",
            "tier": "final",
            "maxDurationSeconds": 1,
        }
    )
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-3", "branches[4].tier")]
    assert '"payment"' in out[0].message and '"points"' in out[0].message


@pytest.mark.parametrize(
    ("branch_id", "edit", "path"),
    [
        ("seat", lambda b: b.pop("leaseSeconds"), "branches[0].leaseSeconds"),
        ("seat", lambda b: b.update(undoWindowSeconds=60), "branches[0].undoWindowSeconds"),
        ("seat", lambda b: b.update(leaseSeconds=30000), "branches[0].holdHorizonSeconds"),
        ("calendar", lambda b: b.pop("compensation"), "branches[2].compensation"),
        ("calendar", lambda b: b.pop("undoWindowSeconds"), "branches[2].undoWindowSeconds"),
        ("calendar", lambda b: b.update(leaseSeconds=60), "branches[2].leaseSeconds"),
        ("payment", lambda b: b.update(compensation={"operation": "card.refund"}), "branches[3].compensation"),
        ("payment", lambda b: b.update(holdHorizonSeconds=60), "branches[3].holdHorizonSeconds"),
    ],
)
def test_a_branch_whose_fields_contradict_its_tier_is_refused_HATP_VAL_4(branch_id: str, edit: Any, path: str) -> None:
    plan = trip()
    edit(branch(plan, branch_id))
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-4", path)]
    assert f'"{branch_id}"' in out[0].message


def test_a_deadline_already_past_is_refused_HATP_VAL_9() -> None:
    plan = trip()
    plan["approvals"][0]["decideBy"] = "2026-11-30T12:00:00Z"
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-9", "approvals[0].decideBy")]
    assert "2026-11-30 12:00 UTC (21 h 0 min ago)" in out[0].message  # in words, from the validator's `now`


def test_an_expired_mandate_is_refused_and_a_deadline_equal_to_now_counts_as_past_HATP_VAL_9() -> None:
    plan = trip()
    plan["mandate"]["expiresAt"] = "2026-12-01T09:00:00Z"
    plan["deadlines"]["commitBy"] = "2026-12-01T09:00:00Z"
    assert rules_and_paths(check(plan)) == [("HATP-VAL-9", "mandate.expiresAt"), ("HATP-VAL-9", "deadlines.commitBy")]


def test_deadlines_out_of_order_are_refused_HATP_VAL_9() -> None:
    plan = trip()
    plan["deadlines"]["decideBy"] = "2027-01-20T00:00:00Z"  # after commitBy 2027-01-15
    plan["mandate"]["expiresAt"] = "2027-01-10T00:00:00Z"  # before commitBy
    assert rules_and_paths(check(plan)) == [("HATP-VAL-9", "deadlines.decideBy"), ("HATP-VAL-9", "deadlines.commitBy")]


def test_HATP_GW_97_the_validator_s_time_violations_say_times_in_words_and_fixes_the_value_to_write() -> None:
    stale = trip()
    stale["deadlines"]["decideBy"] = "2026-12-01T08:55:00Z"  # 5 min before now
    stale["mandate"]["expiresAt"] = "2026-12-01T08:45:00Z"  # expired, and before commitBy
    late = trip()
    late["deadlines"]["decideBy"] = "2027-01-15T00:00:30Z"  # 30 s after commitBy: the same minute in words
    said = {v.path: v.message for v in check(stale)}
    assert said == {
        "mandate.expiresAt": "The mandate expired at 2026-12-01 08:45 UTC (15 min ago): the agent no longer has"
        " authority to spend. Ask the principal for a new mandate.",
        "deadlines.decideBy": "deadlines.decideBy is 2026-12-01 08:55 UTC (5 min ago), already past: the transaction"
        " would abort before it began. Set a deadline in the future.",
        "deadlines.commitBy": "deadlines.commitBy is 2027-01-15 00:00 UTC, 44 days after the mandate expires"
        " (2026-12-01 08:45 UTC): the commit could run without authority. Set commitBy no later than"
        " 2026-12-01T08:45:00Z, or renew the mandate.",
    }
    assert [v.message for v in check(late)] == [
        "deadlines.decideBy is 2027-01-15 00:00 UTC, 30s after deadlines.commitBy (2027-01-15 00:00 UTC): a decision"
        " arriving then can no longer be committed. Move deadlines.decideBy before 2027-01-15T00:00:00Z."
    ]


def test_the_requester_as_approver_is_refused_HATP_VAL_10() -> None:
    plan = trip()
    plan["approvals"][0]["address"] = "human://acme.com/dana"
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-10", "approvals[0].address")]
    assert "human://acme.com/dana" in out[0].message


def test_an_explicit_mode_that_does_not_fit_names_the_mode_that_would_HATP_VAL_11() -> None:
    plan = trip()
    plan["mode"] = "parallel"
    del plan["approvals"][0]["chain"][2]["decideSeconds"]
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-11", "mode")]
    assert "human unbounded" in out[0].message and "approval-first would fit" in out[0].message


def test_auto_with_no_mode_fitting_says_none_does_and_gives_the_arithmetic_HATP_VAL_11() -> None:
    plan = trip()
    branch(plan, "seat").update(leaseSeconds=100, holdHorizonSeconds=100)
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-11", "branches[0].holdHorizonSeconds")]
    assert "No mode fits" in out[0].message and "prepare 80s + commit 80s = 160s" in out[0].message


def test_an_unbounded_call_makes_every_mode_unfit_and_names_the_missing_field_HATP_VAL_11() -> None:
    plan = trip()
    del branch(plan, "room")["maxDurationSeconds"]
    out = [v for v in check(plan) if v.rule == "HATP-VAL-11"]
    assert len(out) == 1 and "branches[1].maxDurationSeconds" in out[0].message


def test_an_undo_window_shorter_than_the_commit_phase_is_refused_HATP_VAL_12() -> None:
    plan = trip()
    branch(plan, "calendar")["undoWindowSeconds"] = 79
    out = check(plan)
    assert rules_and_paths(out) == [("HATP-VAL-12", "branches[2].undoWindowSeconds")]
    assert "79s" in out[0].message and "80s" in out[0].message


def test_an_undo_window_equal_to_the_commit_phase_fits() -> None:
    plan = trip()
    branch(plan, "calendar")["undoWindowSeconds"] = 80
    assert check(plan) == []


def test_all_violations_are_reported_not_the_first() -> None:
    plan = trip()
    plan["approvals"][0]["address"] = "human://acme.com/dana"
    plan["approvals"][0]["maxAmount"]["value"] = "10.00"
    branch(plan, "calendar")["undoWindowSeconds"] = 1
    assert [v.rule for v in check(plan)] == ["HATP-VAL-7", "HATP-VAL-10", "HATP-VAL-12"]


def test_the_kind_is_detected_from_the_members() -> None:
    assert detect_kind(trip()) == "hatp"
    assert detect_kind({"sagaId": "x"}) == "saga"
    assert detect_kind({"hello": 1}) is None
    assert detect_kind([1, 2]) is None
    with pytest.raises(ValueError, match="neither a HATP plan"):
        validate_document({"hello": 1}, NOW)


def test_a_report_serializes_as_the_cli_json_shape() -> None:
    plan = trip()
    plan["mode"] = "holds-first"
    branch(plan, "seat")["holdHorizonSeconds"] = 9100  # parallel fits (9080), holds-first needs 9160
    report = validate_document(plan, NOW)
    assert report.to_dict()["ok"] is False and report.to_dict()["kind"] == "hatp"
    (v,) = report.to_dict()["violations"]
    assert v["rule"] == "HATP-VAL-11" and v["path"] == "mode" and "parallel" in v["message"]


def test_HATP_VAL_14_schema_errors_and_rule_violations_come_in_one_round() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    doc = trip_plan(now, "txn-one-round").wire()
    doc["branches"][0]["leaseSeconds"] = "fifteen minutes"  # schema: an optional member of the wrong type
    doc["branches"][1]["bogus"] = 1  # schema: a member the format does not define
    doc["deadlines"]["decideBy"] = "2026-11-01T00:00:00Z"  # rule: already past
    found = [(v.rule, v.path) for v in plan_violations(doc, now)]
    assert found == [
        ("schema", "branches[0].leaseSeconds"),
        ("schema", "branches[1].bogus"),
        ("HATP-VAL-9", "deadlines.decideBy"),
    ]
    assert [v.rule for v in validate_document(doc, now).violations] == [r for r, _ in found]


def test_HATP_VAL_14_a_plan_missing_a_required_member_gets_its_schema_errors_alone() -> None:
    now = datetime(2026, 12, 1, tzinfo=UTC)
    doc = trip_plan(now, "txn-one-round").wire()
    del doc["branches"][0]["tier"]
    doc["deadlines"]["decideBy"] = "2026-11-01T00:00:00Z"
    assert [(v.rule, v.path) for v in plan_violations(doc, now)] == [("schema", "branches[0].tier")]

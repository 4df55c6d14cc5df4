"""`hatp example-plan`: a plan made from now (or --now) that the validator accepts then, with a txnId of its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.cli import main
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.validator import validate


def test_HATP_MCP_30_the_example_plan_is_valid_at_its_now_and_stale_days_later(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["example-plan", "--now", "2027-03-01T08:30:00Z"]) == 0
    plan = Plan.model_validate(json.loads(capsys.readouterr().out))
    now = datetime(2027, 3, 1, 8, 30, tzinfo=UTC)
    assert (plan.txn_id, plan.created_at) == ("txn-trip-20270301T083000Z", "2027-03-01T08:30:00Z")
    assert validate(plan, now) == []
    assert {v.rule for v in validate(plan, now + timedelta(days=2))} == {"HATP-VAL-9"}
    assert [b.tier for b in plan.branches].count("final") == 1


def test_the_example_plan_without_now_is_valid_on_the_real_clock(capsys: pytest.CaptureFixture[str]) -> None:
    before = datetime.now(UTC)
    assert main(["example-plan", "--txn-id", "txn-mine"]) == 0
    plan = Plan.model_validate(json.loads(capsys.readouterr().out))
    assert plan.txn_id == "txn-mine" and validate(plan, before) == []


@pytest.mark.parametrize(("args", "said"), [(["--now", "soon"], "--now 'soon'"), (["--txn-id", "a b"], "'a b'")])
def test_a_bad_now_or_txn_id_exits_2_with_one_line(
    args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["example-plan", *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and said in out.err


def test_the_example_plan_says_on_stderr_that_its_organisation_is_test_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["example-plan"]) == 0
    out = capsys.readouterr()
    assert "TEST-ONLY organisation acme.com" in out.err and "TEST-ONLY" not in out.out


def test_the_example_for_an_organisation_is_its_own_people_and_fresh_inventory_each_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hatp_mcp.cli.org_layout import init_org

    org = str(init_org(tmp_path / "org", "example.org"))
    assert main(["example-plan", "--org", org]) == 1  # no agent card yet
    assert "hatp card agent" in capsys.readouterr().err
    assert main(["card", "person", "--org", org, "ann", "--display", "Ann Lee"]) == 0
    assert main(["card", "agent", "--org", org, "claude", "--acts-for", "ann"]) == 0
    capsys.readouterr()
    plans = []
    for second in ("2027-03-01T08:00:00Z", "2027-03-01T08:00:01Z"):
        assert main(["example-plan", "--org", org, "--now", second]) == 0
        plans.append(json.loads(capsys.readouterr().out))
    first, again = plans
    assert "acme.com" not in json.dumps(plans) and "Dana" not in json.dumps(plans)
    assert first["requester"] == {"principal": "human://example.org/ann", "agent": "agent://example.org/claude"}
    seat, room, event, _pay = first["branches"]
    assert seat["args"]["passenger"] == room["args"]["guest"] == "Ann Lee" and event["args"]["calendar"] == "ann"
    assert validate(Plan.model_validate(first), parse_ts("2027-03-01T08:00:00Z")) == []

    def keys(plan: dict[str, Any]) -> set[str]:  # what the demo servers key their inventory by
        s, r, e, _p = (b["args"] for b in plan["branches"])
        return {
            f"{s['flight']}/{s['date']}/{s['seat']}",
            f"{r['hotel']}/{r['checkIn']}",
            f"{e['calendar']}/{e['start']}",
        }

    assert first["txnId"] != again["txnId"] and not keys(first) & keys(again)  # begun again, nothing is taken

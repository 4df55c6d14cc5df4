"""The timeline page (HATP-GW-75): a finished record drawn as a sequence diagram with each event's check result,
hostile text inert, no script and nothing fetched; a tampered event is drawn with ✗ and its rule."""

from __future__ import annotations

import copy

import pytest

from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.web.timeline import render_timeline
from tests.txn_helpers import drive

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


@pytest.mark.anyio
async def test_HATP_GW_75_a_finished_record_is_drawn_with_every_event_checked_and_hostile_text_inert(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    plan = trip_plan(clock.now()).model_copy(update={"summary": HOSTILE})
    result = await drive(clock, lambda: world.coordinator().run(plan))
    record = result.record
    page = render_timeline(record, verify_record(record, world.keyring))
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;alert(1)" in page
    assert "default-src 'none'" in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert page.count("✓") == len(record["events"]) and "✗" not in page
    assert "the record holds" in page and "COMMITTED" in page
    for lane in ("coordinator", "airline.example", "hotel.example", "calendar.example", "payments.example"):
        assert f">{lane}</text>" in page
    tampered = copy.deepcopy(record)
    commit = next(i for i, e in enumerate(tampered["events"]) if e["event"] == "commit")
    tampered["events"][commit]["evidence"]["outcome"] = "failed"
    problems = verify_record(tampered, world.keyring)
    drawn = render_timeline(tampered, problems)
    assert problems and f"✗ {problems[0].rule}" in drawn and "problem(s)" in drawn

"""The timeline page (HATP-GW-75, HATP-GW-91): a finished record drawn as a sequence diagram and a list with each
event's check result and time, in the order things happened (a person's decision before the vote and approval it
produced), hostile text inert, no script and nothing fetched; a tampered event is drawn with ✗ and its rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.web.timeline import render_timeline, timeline_steps
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
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count("✓") == len(record["events"]) and "✗" not in page
    assert "the record holds" in page and "COMMITTED" in page
    for lane in ("coordinator", "airline.example", "hotel.example", "calendar.example", "payments.example"):
        assert f">{lane}</text>" in page
    tampered = copy.deepcopy(record)
    commit = next(i for i, e in enumerate(tampered["events"]) if e["event"] == "commit")
    tampered["events"][commit]["evidence"]["outcome"] = "failed"
    problems = verify_record(tampered, world.keyring)
    drawn = render_timeline(tampered, problems)
    assert problems and f"✗ {problems[0].rule}" in drawn and "problem(s)" in drawn


async def _trip_record(clock: FakeClock) -> dict[str, Any]:
    world = build_world(clock)
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now())))
    return result.record


@pytest.mark.anyio
async def test_HATP_GW_91_a_person_s_decision_is_drawn_before_the_gateway_s_vote_and_the_approval_it_produced(
    clock: FakeClock,
) -> None:
    record = await _trip_record(clock)
    page = render_timeline(record, [], names={"human://acme.com/alice": "Alice Adams"})
    svg = page[page.index("<svg") : page.index("</svg>")]
    steps = page[page.index("<ol id=timeline-steps") : page.index("</ol>")]
    vote = next(
        i for i, e in enumerate(record["events"]) if e["event"] == "vote" and e["body"]["branchId"] == "finance"
    )
    for drawn in (svg, steps):
        decided = drawn.index("Alice Adams: approve (" if drawn is svg else "Alice Adams</span> decided")
        assert decided < drawn.index(f"{vote}  vote finance") < drawn.index(f"{vote + 1}  approval finance"), drawn
    assert ">Alice Adams<" in svg and "<title>human://acme.com/alice</title>" in svg  # the name; the address on hover


def test_HATP_GW_91_a_decision_goes_where_its_own_time_puts_it_and_events_keep_the_record_s_order() -> None:
    at = [f"2026-11-29T10:00:0{n}Z" for n in range(6)]
    decisions = [
        {"approver": "human://acme.com/carol", "decision": "approve", "decidedAt": at[2]},
        {"approver": "human://acme.com/bob", "decision": "approve", "decidedAt": "2026-11-29T10:00:00.5Z"},
    ]
    events = [
        {"event": "txn.begin", "author": "coordinator://acme.com/c1", "at": at[0], "body": {}},
        {"event": "approval.deadline", "author": "coordinator://acme.com/c1", "at": at[1], "body": {}},
        {"event": "vote", "author": "mcp://airline.example/hatp", "at": at[3], "body": {"branchId": "seat"}},
        {"event": "vote", "author": "gateway://acme.com", "at": at[4], "body": {"branchId": "finance"}},
        {
            "event": "approval",
            "author": "gateway://acme.com",
            "at": at[4],
            "body": {"requirementId": "finance"},
            "evidence": {"decisions": decisions},
        },
        {
            "event": "record.closed",
            "author": "coordinator://acme.com/c1",
            "at": at[5],
            "body": {"outcome": "COMMITTED"},
        },
    ]
    order = [
        (s.index, s.author.rsplit("/", 1)[-1] if s.decision else s.author) for s in timeline_steps({"events": events})
    ]
    assert order == [
        (0, "coordinator://acme.com/c1"),
        (4, "bob"),  # 10:00:00.5, before the deadline event at 10:00:01
        (1, "coordinator://acme.com/c1"),
        (4, "carol"),  # 10:00:02, before the seat's vote at 10:00:03
        (2, "mcp://airline.example/hatp"),
        (3, "gateway://acme.com"),
        (4, "gateway://acme.com"),
        (5, "coordinator://acme.com/c1"),
    ]


@pytest.mark.anyio
async def test_HATP_GW_91_every_event_and_decision_carries_its_time_in_utc_in_the_file_with_no_script(
    clock: FakeClock,
) -> None:
    record = await _trip_record(clock)
    page = render_timeline(record, verify_record(record, build_world(clock).keyring))
    steps = len(timeline_steps(record))
    assert steps == len(record["events"]) + 1  # alice's decision
    assert page.count('<time datetime="2026-11-29T10:00:00Z"') == steps
    assert page.count("<tspan data-local-time=") == steps and ">10:00:00 UTC</tspan>" in page
    assert "<script" not in page and "stylesheet" not in page and "Times in UTC." in page

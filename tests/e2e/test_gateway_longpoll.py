"""The decision reaches the coordinator at once (HATP-MCP-40), across real processes: the seven servers over
streamable HTTP with the coordinator polling a pending approval only once an hour; the person approves through
the gateway's tools and the trip commits long before any poll is due, the long poll having carried the decision."""

from __future__ import annotations

from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from demo.trip_mcp import plan_for
from demo.trip_suite import open_seven

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


async def test_HATP_MCP_40_the_trip_commits_right_after_the_approval_with_the_next_poll_an_hour_away(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(120):
        async with AsyncExitStack() as stack:
            suite = await open_seven(stack, tmp_path, extra={"coordinator": ["--poll-seconds", "3600"]})
            txn_id = "txn-longpoll-0001"
            await suite.begin(plan_for(txn_id, datetime.now(UTC), "2026-12-10", "14C"))
            asked = await suite.asked(txn_id)
            assert [v["decision"] for v in asked["votes"] if v["branchId"] == "finance"] == ["pending"]
            _who, decided = await suite.human_decides(txn_id)
            with anyio.fail_after(30):  # the poll is 3600 s away: only the long poll can bring the decision
                done = await suite.outcome(txn_id)
    assert decided["state"] == "approved"
    assert done["outcome"] == "COMMITTED"
    events = [e["event"] for e in done["record"]["events"]]
    assert events.index("approval") < events.index("decision") and events[-1] == "record.closed"

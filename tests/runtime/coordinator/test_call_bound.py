"""The bound on one participant call under the system clock (the event loop's own timer): a call that outlives
its branch's maxDurationSeconds is a timeout, and a callee's own TimeoutError stays the callee's failure."""

from __future__ import annotations

import anyio
import pytest

from demo.trip_world import build_world
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator import driver


@pytest.mark.anyio
async def test_a_call_that_outlives_its_bound_is_a_timeout() -> None:
    runtime = build_world(SystemClock()).coordinator()

    async def hangs() -> str:
        await anyio.sleep_forever()
        return "never"

    with pytest.raises(driver._CallTimeout, match=r"no answer within 0\.01s"):
        await runtime._bounded(0.01, hangs)


@pytest.mark.anyio
async def test_a_callees_own_timeout_error_is_not_mistaken_for_the_bound() -> None:
    runtime = build_world(SystemClock()).coordinator()

    async def times_out_itself() -> str:
        raise TimeoutError("the participant's socket timed out")

    with pytest.raises(TimeoutError, match="socket timed out"):
        await runtime._bounded(30, times_out_itself)


@pytest.mark.anyio
async def test_an_answer_within_the_bound_is_returned() -> None:
    runtime = build_world(SystemClock()).coordinator()

    async def quick() -> str:
        return "answer"

    assert await runtime._bounded(30, quick) == "answer"

"""The coordinator driver's child tasks: answers arrive in order, a failing child is never silent, and nothing
outlives the loop (the guarantees the anyio task group gave before)."""

from __future__ import annotations

import anyio
import pytest

from hatp_mcp.runtime.coordinator.calls import Children
from tests.txn_helpers import settle


@pytest.mark.anyio
async def test_answers_arrive_in_the_order_posted_and_ready_takes_what_is_waiting() -> None:
    kids: Children[str] = Children()

    async def answer(text: str) -> None:
        kids.post(text)

    kids.spawn(answer("a"))
    kids.spawn(answer("b"))
    assert await kids.next() == "a"
    assert kids.ready() == ["b"]
    assert kids.ready() == []
    await kids.aclose()
    assert kids.running == 0


@pytest.mark.anyio
async def test_a_child_that_fails_stops_the_loop_with_its_exception() -> None:
    kids: Children[str] = Children()

    async def broken() -> None:
        raise RuntimeError("a bug in a child")

    kids.spawn(broken())
    with pytest.raises(RuntimeError, match="a bug in a child"):
        await kids.next()
    await kids.aclose()


@pytest.mark.anyio
async def test_a_failure_is_raised_even_behind_answers_already_waiting() -> None:
    kids: Children[str] = Children()
    kids.post("early")

    async def broken() -> None:
        raise ValueError("late bug")

    kids.spawn(broken())
    await anyio.lowlevel.checkpoint()
    await anyio.lowlevel.checkpoint()
    with pytest.raises(ValueError, match="late bug"):
        kids.ready()


@pytest.mark.anyio
async def test_closing_cancels_every_running_child_and_waits_for_it() -> None:
    kids: Children[str] = Children()
    cleaned: list[str] = []

    async def forever(name: str) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append(name)

    kids.spawn(forever("one"))
    kids.spawn(forever("two"))
    await anyio.lowlevel.checkpoint()
    assert kids.running == 2
    await kids.aclose()
    assert sorted(cleaned) == ["one", "two"] and kids.running == 0


@pytest.mark.anyio
async def test_a_cancelled_caller_still_leaves_no_child_behind() -> None:
    kids: Children[str] = Children()
    cleaned: list[str] = []

    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append("child")

    with anyio.CancelScope() as scope:
        try:
            kids.spawn(forever())
            scope.cancel()
            await kids.next()
        finally:
            await kids.aclose()
    assert cleaned == ["child"] and kids.running == 0


@pytest.mark.anyio
async def test_a_failure_not_yet_raised_is_raised_by_close_and_a_second_one_is_noted() -> None:
    kids: Children[str] = Children()

    async def broken(text: str) -> None:
        raise RuntimeError(text)

    async def fails_when_cancelled() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            raise ValueError("cleanup bug")

    kids.spawn(broken("first"))
    kids.spawn(broken("second"))
    kids.spawn(fails_when_cancelled())
    await settle()  # the two have failed; the third waits
    with pytest.raises(RuntimeError, match="first") as info:
        await kids.aclose()  # nobody read the inbox: close raises what failed
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "second" in notes and "cleanup bug" in notes and kids.running == 0

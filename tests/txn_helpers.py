"""Helpers for coordinator tests: drive a transaction on the fake clock, and read its record. No sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from hatp_mcp.runtime.clock import FakeClock

R = TypeVar("R")


async def drive(
    clock: FakeClock,
    fn: Callable[[], Awaitable[R]],
    *,
    step_seconds: float = 30.0,
    max_steps: int = 2000,
    on_step: Callable[[int], None] | None = None,
    busy: Callable[[], bool] | None = None,
) -> R:
    """Run `fn` while moving the fake clock forward by `step_seconds` whenever every task is blocked.

    `busy` says when work is running outside the event loop (a SQLite write in a thread): the clock waits for it.
    """
    result: list[R] = []
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:

            async def go() -> None:
                result.append(await fn())

            tg.start_soon(go)
            for i in range(max_steps):
                await settle()
                while busy is not None and busy() and not result:  # a thread (SQLite) is working: let it finish
                    await anyio.lowlevel.checkpoint()
                    await settle()
                if result:
                    break
                if on_step is not None:
                    on_step(i)
                clock.advance(step_seconds)
            else:  # pragma: no cover - a hung transaction
                raise AssertionError(f"the transaction did not finish in {max_steps} clock steps")
    return result[0]


async def settle() -> None:
    """Return once every other task waits on something (like anyio.wait_all_tasks_blocked, minus its 0.1 s naps).

    Tests run on the asyncio backend (tests/conftest.py); a task is blocked when it waits on an unfinished future.
    """
    me = asyncio.current_task()
    for _ in range(100_000):
        await anyio.lowlevel.checkpoint()
        # callbacks waiting to run (anyio delivers cancellation with call_soon) count as work too
        busy = bool(getattr(asyncio.get_running_loop(), "_ready", ()))
        for task in asyncio.all_tasks():
            if busy:
                break
            if task is me:
                continue
            waiter = getattr(task, "_fut_waiter", None)
            if waiter is None or waiter.done():
                busy = True
                break
        if not busy:
            return
    raise AssertionError("tasks never settled")  # pragma: no cover


def events(record: dict[str, Any]) -> list[str]:
    return [e["event"] for e in record["events"]]


def bodies(record: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [e["body"] for e in record["events"] if e["event"] == event]


def receipts(record: dict[str, Any], phase: str) -> list[dict[str, Any]]:
    return [
        e["evidence"]
        for e in record["events"]
        if e.get("evidence", {}).get("type") == "hatp.receipt" and e["evidence"]["phase"] == phase
    ]

"""The trip over stdio across processes: HATP cost against the same tool calls made directly, in the same run.

Prints p50 latency of one transaction (prepare four branches, finance approval, commit four) divided by the p50 of
the four tools called directly without HATP (goal: at most 2x; the HATP trip makes 8 round trips and 2 durable
writes per branch where the direct path makes 4 calls), and transactions/s with 16 transactions in flight.
Run: .venv/bin/python -m bench.mcp_trip [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from demo.trip_mcp import open_suite, plan_for
from hatp_mcp.mcp.serve import quiet
from hatp_mcp.runtime.clock import SystemClock

__all__ = ["main"]

GOAL = 2.0


async def _bench(data: Path, rounds: int, concurrent: int) -> None:
    clock = SystemClock()
    async with AsyncExitStack() as stack:
        clients, runtime, _ring = await open_suite(stack, data, clock)
        hatp: list[float] = []
        direct: list[float] = []
        for i in range(rounds + 3):  # interleaved; the first 3 rounds warm up
            t0 = time.perf_counter()
            result = await runtime.run(plan_for(f"txn-bench-{i}", clock.now(), f"d{i}", f"s{i}"))
            t1 = time.perf_counter()
            await clients["airline"].call_tool("seat_book", {"resource": f"LH123/x{i}", "holder": "bench"})
            await clients["hotel"].call_tool("room_book", {"resource": f"Adlon/x{i}", "holder": "bench"})
            await clients["calendar"].call_tool("event_book", {"resource": f"dana/x{i}", "holder": "bench"})
            await clients["payments"].call_tool("card_book", {"resource": f"tok/x{i}", "holder": "bench"})
            t2 = time.perf_counter()
            if result.outcome.value != "COMMITTED":
                raise RuntimeError(f"bench trip {i} ended {result.outcome.value}")
            if i >= 3:
                hatp.append(t1 - t0)
                direct.append(t2 - t1)
        p50_hatp, p50_direct = statistics.median(hatp), statistics.median(direct)
        ratio = p50_hatp / p50_direct
        print(f"trip p50 with HATP      {p50_hatp * 1000:8.2f} ms  ({rounds} rounds, stdio, 4 server processes)")
        print(f"same tools direct p50   {p50_direct * 1000:8.2f} ms")
        print(f"ratio                   {ratio:8.2f}x  (goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'})")
        done = 0

        async def one(j: int) -> None:
            nonlocal done
            r = await runtime.run(plan_for(f"txn-bench-c{j}", clock.now(), f"c{j}", f"c{j}"))
            done += r.outcome.value == "COMMITTED"

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for j in range(concurrent * 4):
                tg.start_soon(one, j)
        elapsed = time.perf_counter() - t0
        print(f"{concurrent * 4} transactions, {concurrent} at a time... ", end="")
        print(f"{done / elapsed:8.1f} committed transactions/s")


async def _bounded_bench(data: Path, rounds: int, concurrent: int) -> None:
    with anyio.fail_after(600):
        await _bench(data, rounds, concurrent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.mcp_trip")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--concurrent", type=int, default=16)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:] if __name__ == "__main__" else [])
    quiet()
    with tempfile.TemporaryDirectory(prefix="hatp-bench-") as tmp:
        anyio.run(_bounded_bench, Path(tmp), args.rounds, args.concurrent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

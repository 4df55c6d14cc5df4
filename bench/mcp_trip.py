"""The trip over stdio across processes: HATP cost against the same tool calls made directly, in the same run.

Prints p50 latency of one transaction (prepare four branches, finance approval, commit four) divided by the p50 of
the four tools called directly without HATP (goal: at most 2x), and transactions/s with 16 transactions in flight.
What each side does is printed with the numbers (SIDES). Beside the latencies it prints the CPU each process spent
per trip (Linux /proc): on a small machine the five processes share the cores, so CPU per trip bounds latency.
Run: .venv/bin/python -m bench.mcp_trip [--rounds N]
"""

from __future__ import annotations

import argparse
import os
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
SIDES = (
    "HATP: begin (1 durable coordinator append), 4 prepares in parallel (each participant: dry run, the hold placed,"
    " signed vote and receipt, its answer durable), the approval (in process), 1 append with the decision, then the"
    " commits in order: calendar, payment, both holds together (each: preconditions checked, the effect written,"
    " signed receipt, answer durable; then 1 coordinator append); 8 MCP round trips, every signature verified;"
    " each prepare and commit is one durable transaction in its server (hold or effect with the answer, HATP-PART-13)",
    "direct: the same four tools booked one after another (seat_book, room_book, event_book, card_book), each one"
    " durable write (WAL, synchronous=FULL) of the same inventory row the HATP commit takes; 4 MCP round trips",
)


def _children() -> list[int]:
    """Child process ids of this process (Linux); empty where /proc is not there."""
    me = Path(f"/proc/{os.getpid()}/task")
    if not me.is_dir():
        return []
    out: list[int] = []
    for task in me.iterdir():
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Cpu:
    """CPU seconds of this process and of its children (the tool servers), summed per side over the rounds."""

    def __init__(self) -> None:
        self.kids = _children()
        self.own = 0.0
        self.servers = 0.0

    def measure(self) -> tuple[float, float]:
        return time.process_time(), sum(_cpu_seconds(k) for k in self.kids)

    def add(self, before: tuple[float, float]) -> None:
        after = self.measure()
        self.own += after[0] - before[0]
        self.servers += after[1] - before[1]


async def _bench(data: Path, rounds: int, concurrent: int) -> None:
    clock = SystemClock()
    async with AsyncExitStack() as stack:
        clients, runtime, _ring = await open_suite(stack, data, clock)
        hatp: list[float] = []
        direct: list[float] = []
        cpu_hatp, cpu_direct = _Cpu(), _Cpu()
        for i in range(rounds + 3):  # interleaved; the first 3 rounds warm up
            c0 = cpu_hatp.measure()
            t0 = time.perf_counter()
            result = await runtime.run(plan_for(f"txn-bench-{i}", clock.now(), f"d{i}", f"s{i}"))
            t1 = time.perf_counter()
            c1 = cpu_direct.measure()
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
                cpu_hatp.add(c0)
                cpu_direct.add(c1)
        p50_hatp, p50_direct = statistics.median(hatp), statistics.median(direct)
        ratio = p50_hatp / p50_direct
        for side in SIDES:
            print(f"  {side}")
        print(f"trip p50 with HATP      {p50_hatp * 1000:8.2f} ms  ({rounds} rounds, stdio, 4 server processes)")
        print(f"same tools direct p50   {p50_direct * 1000:8.2f} ms")
        print(f"ratio                   {ratio:8.2f}x  (goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'})")
        if cpu_hatp.kids:
            print(
                f"CPU per trip, HATP      {cpu_hatp.own / rounds * 1000:8.2f} ms coordinator + "
                f"{cpu_hatp.servers / rounds * 1000:.2f} ms in the 4 servers"
            )
            print(
                f"CPU per trip, direct    {cpu_direct.own / rounds * 1000:8.2f} ms client + "
                f"{cpu_direct.servers / rounds * 1000:.2f} ms in the 4 servers ({os.cpu_count()} cores)"
            )
        done = 0
        in_flight = anyio.CapacityLimiter(concurrent)  # at most `concurrent` transactions at once

        async def one(j: int) -> None:
            nonlocal done
            async with in_flight:
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

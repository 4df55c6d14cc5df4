"""Committed trips per second with 1, 2 and 4 coordinator processes on one PostgreSQL log, as ratios to one
coordinator in the same run; SQLite vs PostgreSQL for one coordinator; what one trip costs the log.

Each coordinator is its own process (`python -m bench.scaleout --worker ...`) running the trip with its four
participants **in process** (in memory: the log is the only durable store, so what is measured is the coordinators
and their shared log, not tool servers or MCP), its PostgreSQL log with an owner of its own (HATP-STORE-4: each
trip is owned by the process that began it). The parent starts the processes, waits until each is ready, starts
them together and times until the last has committed its trips: committed trips/s = all trips / that wall time.
Layouts run in interleaved rounds (a noisy neighbour hits each alike); printed: the median of rounds per layout
and the median of the per-round ratios to one coordinator on PostgreSQL. Then, from the log of the one-coordinator
rounds: appends, durable write batches, record events and bytes per trip (spec/scale-out.md quotes them).

`python -m bench.scaleout [TRIPS_PER_PROCESS] [CONCURRENCY] [ROUNDS] [--postgresql URL]` (default 60 16 3). On a
2-core machine the Python work of more than two processes shares two cores: the ratios say how far one PostgreSQL
and this design carry before the CPU does not.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench import _report as report
from bench.store import postgresql
from demo.trip_world import build_world, trip_plan
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.store.url import StoreUrl, open_txn_log

__all__ = ["main"]

LAYOUTS = (("sqlite", 1), ("postgresql", 1), ("postgresql", 2), ("postgresql", 4))


async def _worker(store: str, owner: str, n: int, concurrency: int) -> None:
    """One coordinator process: ready, wait for GO on stdin, commit n trips, say DONE with its log's counts."""
    clock = SystemClock()
    async with open_txn_log(StoreUrl.parse(store), owner=owner) as log:
        coordinator = build_world(clock, log=log).coordinator(keep_trace=False)
        plans = [trip_plan(clock.now(), f"txn-bench-{owner}-{i}") for i in range(n)]
        print("READY", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        limiter = anyio.CapacityLimiter(concurrency)

        async def one(i: int) -> None:
            async with limiter:
                result = await coordinator.run(plans[i])
                assert result.outcome.value == "COMMITTED", result.outcome

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        print(f"DONE appends={log.appends} batches={log.batches}", flush=True)


def _round(store: str, processes: int, n: int, concurrency: int, tag: str) -> tuple[float, int, int]:
    """Wall seconds for `processes` coordinators to commit n trips each, and their appends and durable batches."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.scaleout", "--worker", store, f"{tag}-c{k}", str(n), str(concurrency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(processes)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "READY", "a worker did not start"
        start = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("GO\n")
            p.stdin.flush()
        done = []
        for p in procs:
            assert p.stdout is not None
            done.append(p.stdout.readline().split())
        elapsed = time.perf_counter() - start
    finally:
        for p in procs:
            p.wait(timeout=120)
    assert all(d and d[0] == "DONE" for d in done), done
    counts = [dict(f.split("=") for f in d[1:]) for d in done]
    return elapsed, sum(int(c["appends"]) for c in counts), sum(int(c["batches"]) for c in counts)


def _log_shape(url: str) -> dict[str, float]:
    """Per trip in a log: record events, their bytes (canonical JSON text as stored), and decision rows."""
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT txn_id), count(*), sum(octet_length(event)), max(octet_length(event)) FROM txn_event"
        ).fetchone()
        plan = conn.execute("SELECT avg(octet_length(plan)) FROM txn").fetchone()
    assert row is not None and plan is not None
    txns, events, size, largest = (float(v) for v in row)
    return {
        "events": events / txns,
        "event_bytes": size / events,
        "largest_event": largest,
        "record_bytes": size / txns,
        "plan_bytes": float(plan[0]),
    }


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "--worker":
        anyio.run(_worker, args[1], args[2], int(args[3]), int(args[4]))
        return 0
    url = None
    if "--postgresql" in args:
        at = args.index("--postgresql")
        url = args[at + 1]
        del args[at : at + 2]
    n = int(args[0]) if args else report.rounds(60, 8)
    concurrency = int(args[1]) if len(args) > 1 else 16
    rounds = int(args[2]) if len(args) > 2 else report.rounds(3, 1)
    rates: dict[tuple[str, int], list[float]] = {}
    per_trip: list[tuple[float, float]] = []  # (appends, batches) per trip, one coordinator on PostgreSQL
    shape: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="hatp-bench-") as tmp, postgresql(url) as database:
        for r in range(-1, rounds):  # round -1 warms up and is not counted
            for backend, processes in LAYOUTS:
                tag = f"r{r + 1}-{backend}-{processes}"
                db = database() if backend == "postgresql" else ""
                store = db if backend == "postgresql" else f"sqlite:{Path(tmp) / tag}.db"
                seconds, appends, batches = _round(store, processes, n, concurrency, tag)
                if r < 0:
                    continue
                rates.setdefault((backend, processes), []).append(processes * n / seconds)
                if backend == "postgresql" and processes == 1:
                    per_trip.append((appends / n, batches / n))
                    shape = _log_shape(db)
    base = rates[("postgresql", 1)]
    where = "--postgresql URL" if url else "a throwaway local cluster, TCP loopback, fsync on"
    print(
        f"committed trips/s, coordinator processes on one PostgreSQL log ({where}); participants in process, in"
        f" memory; {n} trips per process, {concurrency} at a time in each; median (range) of {rounds} rounds:"
    )
    for backend, processes in LAYOUTS:
        mine = rates[(backend, processes)]
        ratio = report.Spread.of(m / b for m, b in zip(mine, base, strict=True))
        name = "SQLite" if backend == "sqlite" else "PostgreSQL"
        what = f"{processes} coordinator{'s' if processes > 1 else ''} on {name}"
        print(f"  {what:<28} {report.Spread.of(mine).show(unit='trips/s')}   ratio to 1 on PostgreSQL {ratio.show()}")
    per_appends = statistics.median(a for a, _ in per_trip)
    per_batches = statistics.median(b for _, b in per_trip)
    print(
        f"one trip in the log (1 coordinator, PostgreSQL): {per_appends:.1f} appends, {per_batches:.2f} durable write"
        f" batches (group commit across concurrent trips), {shape['events']:.0f} record events of"
        f" {shape['event_bytes']:.0f} bytes on average (largest {shape['largest_event']:.0f}),"
        f" {shape['record_bytes'] / 1024:.1f} KiB of events and a {shape['plan_bytes'] / 1024:.1f} KiB plan"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Committed trips per second for one coordinator, its stores on SQLite and on PostgreSQL, in the same run.

Two layouts, each run on both backends in interleaved rounds (a noisy neighbour hits both alike): the decision log
alone on the backend (participants in memory), and everything durable (the log plus the four participants' branch
state). Printed: each side's best round and the PostgreSQL / SQLite ratio. PostgreSQL is a throwaway cluster the
bench starts itself (tests/postgres_cluster.py: Debian's binaries, loopback TCP, fsync on), or `--postgresql URL`.

`python -m bench.store [N] [CONCURRENCY] [ROUNDS] [--postgresql URL]` (default 100 16 5). One process: the
Python work runs on one core; SQLite fsyncs on the log's thread, PostgreSQL's in its own server processes.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio

from bench import _report as report
from demo.trip_world import build_world, trip_plan
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.store.participant_state import ParticipantStore
from hatp_mcp.store.url import StoreUrl, open_participant_store, open_txn_log

__all__ = ["main"]


async def trips(
    log_url: StoreUrl, state: Callable[[str], StoreUrl] | None, n: int, concurrency: int, tag: str
) -> float:
    """Seconds to commit n trips, `concurrency` at a time."""
    clock = SystemClock()
    opened: list[Any] = []

    def store(name: str) -> ParticipantStore:
        assert state is not None
        s = open_participant_store(state(name))
        opened.append(s)
        return s

    async with open_txn_log(log_url) as log:
        world = build_world(clock, log=log, stores=store if state is not None else None)
        coordinator = world.coordinator(keep_trace=False)
        plans = [trip_plan(clock.now(), f"txn-bench-{tag}-{i}") for i in range(n)]
        limiter = anyio.CapacityLimiter(concurrency)

        async def one(i: int) -> None:
            async with limiter:
                result = await coordinator.run(plans[i])
                assert result.outcome.value == "COMMITTED", result.outcome

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        elapsed = time.perf_counter() - start
    for s in opened:
        s.close()
    return elapsed


@contextlib.contextmanager
def postgresql(url: str | None) -> Iterator[Callable[[], str]]:
    """A function giving a database URL per call: fresh ones on a throwaway cluster, or always `url`."""
    if url is not None:
        yield lambda: url
        return
    from tests.postgres_cluster import running_cluster  # the tests' cluster: the bench is a developer's tool

    with running_cluster() as cluster:
        yield cluster.new_database


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    url = None
    if "--postgresql" in args:
        at = args.index("--postgresql")
        url = args[at + 1]
        del args[at : at + 2]
    n = int(args[0]) if args else report.rounds(100, 10)
    concurrency = int(args[1]) if len(args) > 1 else 16
    rounds = int(args[2]) if len(args) > 2 else report.rounds(5, 1)
    rates: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="hatp-bench-") as tmp, postgresql(url) as database:
        d = Path(tmp)
        fsync = report.fsync_cost(d)
        for r in range(-1, rounds):  # round -1 warms both up and is not counted
            for layout in ("log", "all"):
                for backend in ("sqlite", "postgresql"):
                    tag = f"{layout}-{backend}-{r}"
                    if backend == "sqlite":
                        log_url = StoreUrl.sqlite(d / f"{tag}.db")
                        state = (lambda name, t=tag: StoreUrl.sqlite(d / f"{t}-{name}.db")) if layout == "all" else None
                    else:
                        db = StoreUrl("postgresql", database())
                        state = (lambda _name, db=db: db) if layout == "all" else None  # branch ids differ
                        log_url = db
                    seconds = anyio.run(trips, log_url, state, n, concurrency, tag)
                    if r >= 0:
                        rates.setdefault((layout, backend), []).append(n / seconds)
    where = "--postgresql URL" if url else "a throwaway local cluster, TCP loopback"
    print(
        f"trip transactions, one coordinator, concurrency {concurrency}, median (range) of {rounds} interleaved "
        f"rounds of {n} ({where}); fsync in the SQLite directory, same run, {fsync.show(1e3, 'ms')}:"
    )
    for layout, what in (("log", "the decision log"), ("all", "the log and the four participants' state")):
        lite, pg = report.Spread.of(rates[(layout, "sqlite")]), report.Spread.of(rates[(layout, "postgresql")])
        ratios = report.Spread.of(
            b / a for a, b in zip(rates[(layout, "sqlite")], rates[(layout, "postgresql")], strict=True)
        )
        print(
            f"  {what}: SQLite {lite.show(unit='txn/s')}, PostgreSQL {pg.show(unit='txn/s')}; "
            f"PostgreSQL / SQLite per round {ratios.show(unit='x')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(report.alone("store", main))

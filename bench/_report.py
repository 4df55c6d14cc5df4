"""What every bench reports, so that no figure can mislead on a shared machine.

A figure on its own says little where neighbours load the cores and the disk: this module gives the benches
- CPU time beside wall time (`measure`, `interleaved`): process CPU, and the main thread's where other threads
  (the durable log's worker) would hide in it;
- the spread over interleaved rounds (`Spread`): median and range, printed to the digits the range allows;
- the load average at a bench's start and end, and the build of the modules setup.py compiles (mypyc or Python);
- the disk's fsync cost measured in the same run, in the directory the bench writes to (`fsync_cost`);
- every goal of the project in one table (`GOALS`), each with the floor it is held against: the figure no
  implementation can beat on this machine in this run. A goal beyond its floor cannot be met by any work on the
  code: that is a bench error, not a target (`verdict`).

`record` keeps each goal's figure and floor; `bench.run` prints them as one table at the end (`table`) and exits
non-zero when a goal sits beyond its floor. `QUICK` asks the benches for a few rounds only (`rounds`).
"""

from __future__ import annotations

import importlib
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from bench._cpu import main_thread_cpu

__all__ = [
    "GOALS",
    "QUICK",
    "Direction",
    "Goal",
    "Measured",
    "Row",
    "Spread",
    "Started",
    "Timings",
    "Verdict",
    "alone",
    "build",
    "clear",
    "footer",
    "fsync_cost",
    "header",
    "interleaved",
    "load",
    "measure",
    "record",
    "rounds",
    "rows",
    "sig",
    "table",
    "verdict",
]

QUICK = False
"""Set by `bench.run --quick`: each bench runs a few rounds, enough to exercise it, too few to quote."""


def rounds(full: int, quick: int = 2) -> int:
    """The number of rounds (or calls) a bench runs: `full`, or `quick` under `bench.run --quick`."""
    return quick if QUICK else full


def trip_sizes(args: Sequence[str]) -> tuple[int, int, int]:
    """`[TRIPS [CONCURRENCY [ROUNDS]]]` of the in-process trip benches (bench.txn, bench.mechanisms): trips per
    round, how many run at once, and interleaved rounds; each defaulted (smaller under `bench.run --quick`)."""
    n = int(args[0]) if args else rounds(200, 20)
    concurrency = int(args[1]) if len(args) > 1 else 32
    return n, concurrency, int(args[2]) if len(args) > 2 else rounds(7, 2)


# ---------------------------------------------------------------------------------------------------------------
# Spread and printing


def sig(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits, without an exponent for the magnitudes benches print."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    places = digits - 1 - math.floor(math.log10(abs(x)))
    if places <= 0:
        return f"{round(x, places):,.0f}"
    return f"{x:.{places}f}"


@dataclass(frozen=True, slots=True)
class Spread:
    """Samples of one figure over rounds: the median and the range (min-max)."""

    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Iterable[float]) -> Spread:
        out = tuple(samples)
        if not out:
            raise ValueError("a spread needs at least one sample")
        return cls(out)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    @property
    def wide(self) -> bool:
        """The range spans more than 20 % of the median: then three digits would claim a precision it lacks."""
        m = abs(self.median)
        return m > 0 and (self.high - self.low) / m > 0.2

    def map(self, fn: Callable[[float], float]) -> Spread:
        return Spread(tuple(fn(s) for s in self.samples))

    def show(self, scale: float = 1.0, unit: str = "") -> str:
        """'median (low-high) unit', two significant digits when the range is wide, three when it is narrow."""
        digits = 2 if self.wide else 3
        lo, hi = sorted((self.low * scale, self.high * scale))
        tail = f" {unit}" if unit else ""
        if len(self.samples) == 1:
            return f"{sig(self.median * scale, 3)}{tail}"  # one figure (a floor summed from medians): no range
        return f"{sig(self.median * scale, digits)} ({sig(lo, digits)}-{sig(hi, digits)}){tail}"


@dataclass(frozen=True, slots=True)
class Measured:
    """One round of a callable: wall seconds, this process's CPU seconds and the main thread's, per call."""

    wall: float
    cpu: float
    thread: float


def measure(fn: Callable[[], object], number: int) -> Measured:
    """Run `fn` `number` times; the wall, process CPU and main-thread CPU seconds per call."""
    w0, c0, t0 = time.perf_counter(), time.process_time(), main_thread_cpu()
    for _ in range(number):
        fn()
    w1, c1, t1 = time.perf_counter(), time.process_time(), main_thread_cpu()
    return Measured((w1 - w0) / number, (c1 - c0) / number, (t1 - t0) / number)


@dataclass(frozen=True, slots=True)
class Timings:
    """Per-call wall and CPU seconds of one callable over interleaved rounds."""

    wall: Spread
    cpu: Spread
    thread: Spread

    def show(self, scale: float = 1e6, unit: str = "us") -> str:
        return f"wall {self.wall.show(scale, unit)}, CPU {self.cpu.show(scale, unit)}"


def interleaved(fns: dict[str, Callable[[], object]], number: int, n_rounds: int) -> dict[str, Timings]:
    """Each callable run `number` times per round, the callables taking turns within every round (so a burst of
    load falls on all of them alike), after one warm-up pass each; their per-call timings over the rounds."""
    for fn in fns.values():
        measure(fn, max(1, number // 10))
    got: dict[str, list[Measured]] = {name: [] for name in fns}
    for _ in range(n_rounds):
        for name, fn in fns.items():
            got[name].append(measure(fn, number))
    return {
        name: Timings(Spread.of(m.wall for m in ms), Spread.of(m.cpu for m in ms), Spread.of(m.thread for m in ms))
        for name, ms in got.items()
    }


# ---------------------------------------------------------------------------------------------------------------
# The machine: load, build, fsync


def load() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (zeros where the platform has none)."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def _show_load(avg: tuple[float, float, float]) -> str:
    return f"{avg[0]:.1f}/{avg[1]:.1f}/{avg[2]:.1f}"


def build() -> str:
    """Which build of the modules setup.py compiles with mypyc this process runs, by the tests' own check
    (tests/compiled.py): `compiled (mypyc): saga_view saga_rules canonical` where all are compiled from their
    current source; else each kind named, `Python:` for the source (setup.py's fallback where no C compiler was
    there, or a tree never built), `older than the source:` for a build an edit has passed."""
    from tests.compiled import build_state, compiled_modules

    kinds: dict[str, list[str]] = {"compiled (mypyc)": [], "Python": [], "older than the source": []}
    names = {"compiled": "compiled (mypyc)", "Python": "Python", "stale": "older than the source"}
    for name in compiled_modules():
        kinds[names[build_state(importlib.import_module(name))]].append(name.rpartition(".")[2])
    return "; ".join(f"{kind}: {' '.join(leaves)}" for kind, leaves in kinds.items() if leaves)


def fsync_cost(directory: str | Path | None = None, n: int = 20) -> Spread:
    """Seconds of one 4 KiB write plus fsync to a fresh file in `directory` (the one the bench writes its data
    to; the system's temporary directory when None), `n` times: what each durable write pays on this disk now."""
    block = b"\0" * 4096
    out: list[float] = []
    fd, path = tempfile.mkstemp(prefix="hatp-fsync-", dir=directory)
    try:
        for _ in range(max(1, n)):
            start = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            out.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        os.unlink(path)
    return Spread.of(out)


@dataclass(frozen=True, slots=True)
class Started:
    """What `header` read at a bench's start, for `footer` to print beside what it reads at the end."""

    name: str
    wall: float
    cpu: float
    fsync: Spread


def header(name: str, directory: str | Path | None = None) -> Started:
    """Print the load average, the build of the compiled modules and the fsync cost in `directory` at a bench's
    start; the fsync cost is kept for the floors that include durable writes."""
    fsync = fsync_cost(directory)
    print(f"  [{name}] load {_show_load(load())} at start, {build()}, fsync {fsync.show(1e3, 'ms')}")
    return Started(name, time.perf_counter(), time.process_time(), fsync)


def footer(started: Started) -> None:
    """Print the load average at a bench's end, with its wall and process CPU seconds (its child processes,
    the servers it starts, are in neither: each bench prints theirs)."""
    wall, cpu = time.perf_counter() - started.wall, time.process_time() - started.cpu
    print(f"  [{started.name}] load {_show_load(load())} at end; {wall:.1f} s wall, {cpu:.1f} s CPU in this process")


# ---------------------------------------------------------------------------------------------------------------
# Goals and their floors


class Direction(Enum):
    AT_MOST = "<="
    AT_LEAST = ">="


@dataclass(frozen=True, slots=True)
class Goal:
    """One goal: the figure a bench reports, the bound it must meet, and where the floor held against it comes
    from. For an at-most goal the floor is the least the figure can be (a goal under it is a bench error); for an
    at-least goal it is the most the figure can be (a goal over it is a bench error). `floor_from` is None for a
    goal that has no floor, only a baseline. With `of_floor` the bound applies to the figure over its floor (the
    goal is "at most 1.2x the floor"): the floor is then 1 in the goal's unit, and a bound under 1 (at most) or
    over 1 (at least) is the bench error."""

    bench: str
    figure: str
    direction: Direction
    bound: float
    unit: str
    floor_from: str | None
    source: str
    of_floor: bool = False


GOALS: dict[str, Goal] = {
    "trip_latency": Goal(
        "bench.mcp_trip",
        "trip begin-to-outcome / the bare calls, wall",
        Direction.AT_MOST,
        1.5,
        "x",
        "the trip's requests up to the outcome (4 prepares, the calendar's and the payment's commits) replayed from "
        "stored answers, plus its critical-path fsyncs, Ed25519 signatures and verifications at the same run's costs, "
        "over the bare calls",
        "#38",
    ),
    "coordinator_cpu": Goal(
        "bench.mcp_trip",
        "coordinator CPU per trip (ms)",
        Direction.AT_MOST,
        1.3,
        "x",
        "the 8 requests replayed from stored answers, the record's signatures and verifications at their same-run "
        "cost, and the durable log's thread",
        "#38",
        of_floor=True,
    ),
    "in_process": Goal(
        "bench.txn",
        "committed trips/s by CPU",
        Direction.AT_LEAST,
        0.7,
        "x",
        "the same signatures, verifications, digests and durable appends alone, trips/s by CPU, same rounds",
        "#38",
        of_floor=True,
    ),
    "gated_call": Goal(
        "bench.gated",
        "gated call / ungated, wall",
        Direction.AT_MOST,
        1.2,
        "x",
        "the ungated call carrying the approval, the gate's Ed25519 verifications and its durable commit, same run",
        "#38",
        of_floor=True,
    ),
    "hatp_verify": Goal(
        "bench.gated",
        "hatp verify events/s by CPU",
        Direction.AT_LEAST,
        0.8,
        "x",
        "the record's own signatures verified fresh, nothing else, by CPU in the same rounds, events/s",
        "#38",
        of_floor=True,
    ),
    "journal_proxy": Goal(
        "bench.journal_proxy",
        "proxied call / direct, wall",
        Direction.AT_MOST,
        1.2,
        "x",
        "the bare forwarding hop plus the journal's own work in process, same rounds",
        "#38",
        of_floor=True,
    ),
    "cli_start": Goal(
        "bench.cli",
        "hatp validate FILE, wall (ms)",
        Direction.AT_MOST,
        1.5,
        "x",
        "importing the modules validation needs, in a fresh interpreter, same run",
        "#38",
        of_floor=True,
    ),
    "cli_verify": Goal(
        "bench.cli",
        "hatp verify RECORD --keys FILE, wall (ms)",
        Direction.AT_MOST,
        1.5,
        "x",
        "importing the modules verification needs, in a fresh interpreter, same run",
        "#38",
        of_floor=True,
    ),
    "full_plans": Goal(
        "bench.validate",
        "full plans/s by CPU (parse + every HATP-VAL rule)",
        Direction.AT_LEAST,
        10_000,
        "/s",
        "parsing the plan alone (Plan.model_validate), plans/s by CPU in the same rounds: no check beats it",
        "#38",
    ),
    "saga_reference": Goal(
        "bench.saga_reference",
        "validate_saga / the Node reference's time",
        Direction.AT_MOST,
        1.0,
        "x",
        None,
        "#38",
    ),
}


class Verdict(Enum):
    MET = "met"
    NOT_MET = "NOT met"
    ERROR = "ERROR (goal beyond floor)"


def verdict(goal: Goal, figure: float, floor: float | None) -> Verdict:
    """Met or not; ERROR when the goal lies beyond the floor the same run computed (an at-most goal under the
    floor, an at-least goal over it): no code change can meet such a goal, so the bench, not the code, is wrong.
    A goal relative to its floor (`of_floor`) compares figure / floor with its bound, and needs the floor."""
    if goal.of_floor:
        if floor is None or floor <= 0:
            return Verdict.ERROR  # fail closed: a goal stated against a floor the run did not compute
        figure, floor = figure / floor, 1.0
    if floor is not None:
        if goal.direction is Direction.AT_MOST and goal.bound < floor:
            return Verdict.ERROR
        if goal.direction is Direction.AT_LEAST and goal.bound > floor:
            return Verdict.ERROR
    ok = figure <= goal.bound if goal.direction is Direction.AT_MOST else figure >= goal.bound
    return Verdict.MET if ok else Verdict.NOT_MET


def _goal_text(goal: Goal) -> str:
    bound = f"{goal.bound:,g}"
    return f"{goal.direction.value} {bound}x floor" if goal.of_floor else f"{goal.direction.value} {bound}{goal.unit}"


@dataclass(frozen=True, slots=True)
class Row:
    """A goal's figure and floor as one bench run measured them, with the load while it ran."""

    key: str
    figure: Spread
    floor: Spread | None
    load: tuple[float, float, float]
    note: str = ""
    verdict: Verdict = field(init=False)

    def __post_init__(self) -> None:
        goal = GOALS[self.key]
        floor = None if self.floor is None else self.floor.median
        object.__setattr__(self, "verdict", verdict(goal, self.figure.median, floor))


_ROWS: list[Row] = []


def record(key: str, figure: Spread | float, floor: Spread | float | None, note: str = "") -> Row:
    """Keep goal `key`'s figure and floor for the table, print the goal beside them with its verdict, and return
    the row. Raises KeyError for a goal not in GOALS."""
    fig = figure if isinstance(figure, Spread) else Spread.of([figure])
    flo = floor if isinstance(floor, Spread) or floor is None else Spread.of([floor])
    row = Row(key, fig, flo, load(), note)
    _ROWS.append(row)
    goal = GOALS[key]
    floor_text = "none" if flo is None else flo.show()
    print(f"  goal {key}: {goal.figure} {fig.show()}; goal {_goal_text(goal)}; floor {floor_text}: {row.verdict.value}")
    return row


def rows() -> list[Row]:
    """The rows recorded so far in this process."""
    return list(_ROWS)


def clear() -> None:
    _ROWS.clear()


def alone(name: str, main: Callable[[], int | None]) -> int:
    """Run one bench's main as `python -m bench.NAME` does: the machine printed before and after, as bench.run
    prints it, and the goals it recorded as a table. The exit status is main's, or 1 when a goal lies beyond its
    floor."""
    started = header(name)
    code = main() or 0
    footer(started)
    found = rows()
    if found:
        print(table(found))
    return 1 if any(r.verdict is Verdict.ERROR for r in found) else code


def table(found: Sequence[Row], missing: Iterable[tuple[str, str]] = ()) -> str:
    """The one table `make bench` ends with: a line per recorded goal (bench, figure, goal, floor, figure / floor,
    verdict, load at the time, the bench's note), then a line per (goal, why) in `missing`: the goals no bench
    recorded in this run, with why ("not run", "no figure" when its bench ran and could not measure it, "no bench
    yet")."""
    head = ("bench", "figure", "goal", "floor", "ratio", "verdict", "load", "note")
    lines: list[tuple[str, ...]] = [head]
    for r in found:
        g = GOALS[r.key]
        floor = "none" if r.floor is None else r.floor.show()
        ratio = "-" if r.floor is None or r.floor.median == 0 else sig(r.figure.median / r.floor.median, 2)
        lines.append(
            (
                g.bench,
                f"{g.figure}: {r.figure.show()}",
                _goal_text(g),
                floor,
                ratio,
                r.verdict.value,
                _show_load(r.load),
                r.note,
            )
        )
    for key, why in missing:
        g = GOALS[key]
        lines.append((g.bench, g.figure, _goal_text(g), "-", "-", why, "-", ""))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)

"""Each optimisation the code keeps, on and off in the same run: what it gains on the benches it targets.

One mechanism of each kind stays only while it pays its way (issue #38): at least `KEEP` gain on its bench, in
the same rounds. Three benches, each run with every mechanism on and then with one of them switched off, the
variants taking turns within every round (each leads in turn): bench.txn's committed trips (in process, durable
SQLite log, 4 branches and one approval, many at once), and bench.gated's gate alone in process (a fresh
approval checked in full and its nonces spent durably, per call), and bench.validate's begin (parse, rules,
digest). Switched off by patching from here, or by the
one class attribute the bench sets (GroupCommit.grouped):
- group commit (hatp_mcp/store/group_commit.py): one write per append instead of one per batch;
- the worker thread for the log's SQLite work (anyio.to_thread): the work run on the event loop instead;
- the plan memo (hatp_mcp/core/model/plan.py `remembered`): a Plan's digest, money and validation mark
  recomputed on every use;
- the keyring's memo of verified signatures (hatp_mcp/core/signing/keys.py): every signature verified again.
Alternatives the code dropped are timed the same way, against what replaced them: a dedicated thread handing
back with one call_soon_threadsafe (the hop the gate and the log each had of their own) instead of
anyio.to_thread.

Gain = rate with the mechanism / rate without it - 1, per round (median and range), judged by CPU (the goals'
measure where the disk and the neighbours move the wall), the wall printed beside. `python -m bench.mechanisms
[N] [CONCURRENCY] [ROUNDS]` (default 200 32 7; the gate's side runs N calls a round).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from queue import SimpleQueue
from typing import Any, cast
from unittest import mock

import anyio

from bench import _report as report
from bench.txn import trips
from demo.gated_server import REQUIRES, approval_gate, build
from hatp_mcp.core.model import money, plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.core.validate.validator import validate
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.gated_tools import ApprovalGate, gate_tools
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gc_tuning import settle_heap
from hatp_mcp.store.group_commit import GroupCommit

__all__ = ["KEEP", "main"]

KEEP = 0.05
"""The least same-run gain a mechanism must show on its bench to stay."""


@dataclass(frozen=True, slots=True)
class Switch:
    """One mechanism: how to run without it, and the benches it targets ("txn", "gate")."""

    name: str
    off: Callable[[], contextlib.AbstractContextManager[object]]
    benches: tuple[str, ...]
    kept: bool = True  # False: an alternative the code dropped, timed against what replaced it


@contextlib.contextmanager
def _one_write_per_append() -> Iterator[None]:
    with mock.patch.object(GroupCommit, "grouped", False):
        yield


async def _on_the_loop(fn: Callable[..., Any], *args: Any, **_: Any) -> Any:
    return fn(*args)


@contextlib.contextmanager
def _no_thread() -> Iterator[None]:
    with mock.patch("anyio.to_thread.run_sync", _on_the_loop):
        yield


def _recompute(p: plan.Plan, what: str, compute: Callable[[plan.Plan], Any]) -> Any:
    return compute(p)


@contextlib.contextmanager
def _no_plan_memo() -> Iterator[None]:
    with mock.patch.object(plan, "remembered", _recompute), mock.patch.object(money, "remembered", _recompute):
        yield


def _verify_every_time(self: Keyring, entry: PublicKeyEntry, sig: bytes, message: bytes) -> None:
    entry.key.verify(sig, message)


@contextlib.contextmanager
def _no_signature_memo() -> Iterator[None]:
    with mock.patch.object(Keyring, "check_signature", _verify_every_time):
        yield


class _DedicatedThread:
    """The hop the code dropped: one long-lived thread taking jobs from a queue, each handing its result back with
    one call_soon_threadsafe that settles the awaiting coroutine's future."""

    def __init__(self) -> None:
        self._jobs: SimpleQueue[tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[..., Any], Any]] = (
            SimpleQueue()
        )
        threading.Thread(target=self._serve, name="bench-dedicated", daemon=True).start()

    def _serve(self) -> None:
        while True:
            loop, waiter, fn, args = self._jobs.get()
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting coroutine
                result, error = None, exc
            loop.call_soon_threadsafe(self._settle, waiter, result, error)

    @staticmethod
    def _settle(waiter: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        if waiter.done():
            return
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(result)

    async def run_sync(self, fn: Callable[..., Any], *args: Any, **_: Any) -> Any:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Any] = loop.create_future()
        self._jobs.put((loop, waiter, fn, args))
        return await waiter


_DEDICATED: list[_DedicatedThread] = []


@contextlib.contextmanager
def _dedicated_thread() -> Iterator[None]:
    if not _DEDICATED:
        _DEDICATED.append(_DedicatedThread())
    with mock.patch("anyio.to_thread.run_sync", _DEDICATED[0].run_sync):
        yield


SWITCHES = (
    Switch("group commit (one durable commit per batch)", _one_write_per_append, ("txn",)),
    Switch("worker thread for SQLite work (anyio.to_thread)", _no_thread, ("txn",)),
    Switch("plan memo (digest, money, mark once per Plan)", _no_plan_memo, ("txn", "validate")),
    Switch("keyring memo of verified signatures", _no_signature_memo, ("txn", "gate")),
    Switch("dropped: a dedicated thread instead of anyio.to_thread", _dedicated_thread, ("txn", "gate"), kept=False),
)

# The gate tests' helpers (the gateway's approval of one call, its arguments), loaded by name as bench.gated does.
_gate_tests: Any = importlib.import_module("tests.mcp.test_gated_tools")
ROOT = Path(__file__).resolve().parents[1]
ORG = ROOT / "spec" / "fixtures" / "org"
NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)


def _trip_run(d: Path, tag: str, n: int, concurrency: int) -> tuple[float, float]:
    """(trips/s by wall, trips/s by CPU) of one batch of trips."""
    c0, w0 = time.process_time(), time.perf_counter()
    anyio.run(trips, d / f"{tag}.db", n, concurrency)
    return n / (time.perf_counter() - w0), n / (time.process_time() - c0)


def _validate_run(doc: dict[str, Any], n: int) -> tuple[float, float]:
    """(plans/s by wall, by CPU): what a begin computes from a plan (bench.validate's "begin": the parse, every
    HATP-VAL rule, then the digest), `n` times."""
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        plan_ = Plan.model_validate(doc)
        if validate(plan_, NOW):
            raise SystemExit("the trip plan no longer validates")
        plan_.digest()
    return n / (time.perf_counter() - w0), n / (time.process_time() - c0)


class _GateCalls:
    """`n` gated calls checked by a fresh gate (its own replay cache and keyrings), the same approvals each run."""

    def __init__(self, d: Path, n: int) -> None:
        self.d = d
        self.clock = FakeClock()
        self.args = [{**_gate_tests.ARGS, "card": f"tok_visa_{i:04d}"} for i in range(n)]
        self.tool_call = anyio.run(self._tool_call)
        self.approvals = [_gate_tests.approve(self.tool_call, self.clock.now(), args=a) for a in self.args]

    def _gate(self, tag: str) -> tuple[Any, ApprovalGate]:
        server = build(self.d / f"{tag}-server.db", ORG, self.clock, gated=False)
        gate = approval_gate(self.d / f"{tag}-gate.db", ORG, self.clock)
        gate_tools(server, gate, tools={"charge_card": {"requires": REQUIRES}})
        return server, gate

    async def _tool_call(self) -> dict[str, Any]:
        server, gate = self._gate("ask")
        try:
            await gate.check_call(server, "charge_card", self.args[0], None)
        except HatpError as exc:  # refused: the error names the call to get approved
            return cast(dict[str, Any], (exc.data or {})["toolCall"])
        finally:
            gate.cache.close()
        raise SystemExit("the gate let an unapproved call through")

    def round(self, r: int, variants: Variants) -> dict[str, tuple[float, float]]:
        """One round: the `n` calls, each taken by every variant in turn (each leading in turn), every variant
        with a fresh gate of its own; per variant (calls/s by wall, calls/s by CPU). Alternating call by call
        puts a burst of load on all of them alike."""
        return anyio.run(self._round, r, variants)

    async def _round(self, r: int, variants: Variants) -> dict[str, tuple[float, float]]:
        gates = {name: self._gate(f"r{r}-{i}") for i, (name, _off) in enumerate(variants)}
        spent = {name: [0.0, 0.0] for name, _off in variants}
        for k, (a, approval) in enumerate(zip(self.args, self.approvals, strict=True)):
            for name, off in variants[k % len(variants) :] + variants[: k % len(variants)]:
                server, gate = gates[name]
                with off() if off is not None else contextlib.nullcontext():
                    c0, w0 = time.process_time(), time.perf_counter()
                    await gate.check_call(server, "charge_card", a, approval)
                    spent[name][0] += time.perf_counter() - w0
                    spent[name][1] += time.process_time() - c0
        for _server, gate in gates.values():
            gate.cache.close()
        n = len(self.args)
        return {name: (n / wall, n / cpu) for name, (wall, cpu) in spent.items()}


Variants = list[tuple[str, "Callable[[], contextlib.AbstractContextManager[object]] | None"]]
Round = Callable[[int, Variants], dict[str, tuple[float, float]]]


def _in_turn(run: Callable[[str], tuple[float, float]]) -> Round:
    """A round of whole runs, one per variant, each variant leading in turn."""

    def one_round(r: int, variants: Variants) -> dict[str, tuple[float, float]]:
        got = {}
        for i, (name, off) in enumerate(variants[r % len(variants) :] + variants[: r % len(variants)]):
            with off() if off is not None else contextlib.nullcontext():
                got[name] = run(f"r{r}-{i}")
        return got

    return one_round


Gains = dict[str, tuple[report.Spread, report.Spread]]


def _interleaved(bench: str, one_round: Round, rounds: int) -> Gains:
    """Per switch targeting `bench`: its gain per round, by wall and by CPU."""
    switches = [s for s in SWITCHES if bench in s.benches]
    variants: Variants = [("on", None), *((s.name, s.off) for s in switches)]
    got: dict[str, list[tuple[float, float]]] = {name: [] for name, _off in variants}
    for r in range(rounds):
        for name, rates in one_round(r, variants).items():
            got[name].append(rates)
    on = got["on"]
    out: Gains = {}
    for s in switches:
        pairs = list(zip(on, got[s.name], strict=True))
        # kept: what the mechanism gains, with / without; dropped: what it would gain over what the code has
        ratios = [(a, b) if s.kept else (b, a) for a, b in pairs]
        wall = report.Spread.of(x[0] / y[0] - 1 for x, y in ratios)
        cpu = report.Spread.of(x[1] / y[1] - 1 for x, y in ratios)
        out[s.name] = (wall, cpu)
    return out


def _show(title: str, found: Gains) -> None:
    print(title)
    width = max(len(s.name) for s in SWITCHES)
    for s in SWITCHES:
        if s.name in found:
            wall, cpu = found[s.name]
            print(f"  {s.name:<{width}}  CPU {cpu.show(100, '%')}, wall {wall.show(100, '%')}")


def verdicts(by_bench: dict[str, Gains]) -> list[str]:
    """Per mechanism, judged by the median CPU gain on the bench it gains most on: a kept one stays at `KEEP` or
    more there; a dropped one stays dropped while it gains less than `KEEP` on every bench."""
    lines = []
    width = max(len(s.name) for s in SWITCHES)
    for s in SWITCHES:
        gains = {bench: found[s.name][1].median for bench, found in by_bench.items() if s.name in found}
        if not gains:
            continue
        best = max(gains, key=lambda bench: gains[bench])
        figure = f"{gains[best]:+.1%} on bench.{best}"
        if s.kept:
            verdict = "kept: pays its way" if gains[best] >= KEEP else f"UNDER {KEEP:.0%} everywhere: remove it"
        else:
            verdict = "stays dropped" if gains[best] < KEEP else f"OVER {KEEP:.0%}: reconsider"
        lines.append(f"  {s.name:<{width}}  {figure}: {verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    n, concurrency, rounds = report.trip_sizes(args)
    with tempfile.TemporaryDirectory(prefix="hatp-bench-") as tmp:
        d = Path(tmp)
        fsync = report.fsync_cost(d)
        anyio.run(trips, d / "warm.db", 20, concurrency)
        calls = _GateCalls(d, n)
        calls.round(-1, [("warm", None)])
        settle_heap()
        print(f"each mechanism on and off, {rounds} interleaved rounds; fsync here {fsync.show(1e3, 'ms')}")
        print(f"gain = rate with it / rate without it - 1, per round; kept at {KEEP:.0%} or more by CPU")
        txn = _interleaved("txn", _in_turn(lambda tag: _trip_run(d, tag, n, concurrency)), rounds)
        _show(f"bench.txn's committed trips ({n} a round, {concurrency} at once):", txn)
        gate = _interleaved("gate", calls.round, rounds)
        _show(f"bench.gated's gate in process ({n} fresh approvals a round, variants alternating per call):", gate)
        doc = json.loads((ROOT / "spec" / "fixtures" / "hatp" / "trip.valid.json").read_text())
        plans = 10 * n
        checked = _interleaved("validate", _in_turn(lambda _tag: _validate_run(doc, plans)), rounds)
        _show(f"bench.validate's begin (parse, rules, digest; {plans} plans a round):", checked)
    print("verdicts (the median CPU gain on the bench each gains most on):")
    for line in verdicts({"txn": txn, "gated": gate, "validate": checked}):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(report.alone("mechanisms", main))

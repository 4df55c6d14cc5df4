"""The trip over stdio across processes: HATP cost against the same tool calls made directly, in the same run.

Prints p50 latency of one transaction from begin to the outcome the agent is told (prepare four branches, finance
approval, commit the calendar and the payment; the holds' commits and the close follow the answer, HATP-TXN-25)
divided by the p50 of the four tools called directly without HATP (goal `trip_latency` in bench/_report.py), and
transactions/s with 16 transactions in flight.
Each round runs a trip, then the four direct calls, then the replay, so all sides see the same machine.
What each side does is printed with the numbers (SIDES). Beside the latencies it prints the CPU each process spent
per trip (Linux /proc): on a small machine the five processes share the cores, so CPU per trip bounds latency;
the coordinator's CPU per trip has its own goal (`coordinator_cpu`, a multiple of its floor).
It also replays each trip's 8 hatp requests (same rounds, same payloads, each signed afresh by the coordinator and
checked by the participant as any request is, answered from the participants' stored first answers): the
transport, the SDK and the proof of the sender, so what the rest of HATP's work adds is printed apart from them
(latency: the replay up to the payment's answer, where the trip tells the agent, plus the trip's critical-path
fsyncs, Ed25519 signatures and verifications, is the floor under the latency goal; CPU per trip: the replay's
coordinator CPU, holds' commits included, against the direct client's is the floor under the CPU goal);
and it prints where each side's time goes, round of calls by round of calls (the median of each piece).
It prints what no optimisation may drop, from the same run: the replay, the record's signatures and the
evidence's verifications timed alone, the durable log's thread; against the CPU goal that is the floor.
`--profile TRIPS` profiles that many more trips afterwards (cProfile on the thread's CPU clock) and prints the
top lines; `--wakeups` counts this process's event-loop iterations and callbacks per trip, each side apart.
Run: .venv/bin/python -m bench.mcp_trip [--rounds N] [--profile TRIPS] [--wakeups]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import Client

from bench import _report as report
from bench._cpu import children, cpu_seconds, main_thread_cpu, own_cpu
from bench._wakeups import Wakeups
from demo.trip_mcp import SERVERS, open_suite, plan_for
from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import BranchResult, CommitRequest, PrepareRequest, PrepareResult
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import digest as digest_of
from hatp_mcp.core.signing.keys import PublicKeyEntry, SigningKey, b64u_decode, signing_bytes
from hatp_mcp.mcp.call import Signer, call_raw
from hatp_mcp.mcp.serve import quiet
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.interfaces import Participant

__all__ = ["main"]

R = TypeVar("R")
CRITICAL_FSYNCS = 4
"""Durable writes the agent waits for, one after another, until it is told the outcome (the coordinator's forced
log write of the decision, HATP-TXN-27; the begin is written before the prepares and fsynced while they are out,
the write that tells the outcome is unforced, HATP-TXN-28; the participants' votes, the calendar's and the
payment's commits), against the 4 the direct calls pay inside their own time."""
CRITICAL_SIGNS = 10
"""Ed25519 signatures the agent waits for, each after the one before, until it is told: the coordinator's txn.begin
and approval.deadline (chained, before the write whose head the prepares name, HATP-REC-19); the last
answering participant's vote or its receipt (independent of each other: one counts; the other participants sign
meanwhile); the coordinator's vote and receipt events for that answer, then the decision (chained: every vote
precedes the decision, HATP-REC-11); the calendar's commit receipt, then the payment's (commit order); the
payment's commit event and outcome.decided (chained, before the write that tells the agent). Not counted: the
approval (it may overlap the prepares), the requests' auth (in the replay), the calendar's commit event (it may be
signed while the payment's commit is out)."""
CRITICAL_VERIFIES = 3
"""Verifications on the same path, each of evidence the next step rests on: the last prepare answer's vote and
receipt (independent of each other: one counts; the earlier answers are checked while it is awaited), the calendar's
commit receipt (before the payment's commit may go), the payment's (before outcome.decided). Not counted: the
approval's, the participants' checks of the requests (in the replay) and of the decision."""
SLOW_FSYNC = 1e-3  # seconds: above it the disk is called slow in the output (the goal is the same for both)
NAMES = {uri: name for name, uri in SERVERS.items()}
SIDES = (
    "HATP: begin (the plan and txn.begin written, fsynced while the prepares are out), 4 prepares in parallel (each "
    "participant: dry run, the hold placed, signed vote and receipt, its answer durable), the approval (in process), "
    "a forced write with the votes and the decision, then the commits in order: calendar, payment (each: "
    "preconditions checked, the effect written, signed receipt, answer durable), an unforced write with their "
    "receipts and outcome.decided: the agent is told COMMITTED here (HATP-TXN-25); then, off its path, both holds "
    "together and the close; 8 MCP round trips, every signature verified; each prepare and commit is one durable "
    "transaction in its server (hold or effect with the answer, HATP-PART-13)",
    "direct: the same four tools booked one after another (seat_book, room_book, event_book, card_book), each one"
    " durable write (WAL, synchronous=FULL) of the same inventory row the HATP commit takes; 4 MCP round trips",
)


class _Cpu:
    """CPU seconds of this process and of its children (the tool servers), summed per side over the rounds, and
    this process's event-loop iterations and callbacks (`wakeups`, counted with --wakeups; else they stay 0)."""

    def __init__(self, wakeups: Wakeups) -> None:
        self.kids = children()
        self.wakeups = wakeups
        self.own = 0.0
        self.main = 0.0  # of `own`, the main thread's (the event loop); the rest is the durable log's thread
        self.servers = 0.0
        self.iterations = 0
        self.callbacks = 0

    def measure(self) -> tuple[float, float, float, int, int]:
        return own_cpu(), main_thread_cpu(), sum(cpu_seconds(k) for k in self.kids), *self.wakeups.read()

    def add(self, before: tuple[float, float, float, int, int], after: tuple[float, float, float, int, int]) -> None:
        self.own += after[0] - before[0]
        self.main += after[1] - before[1]
        self.servers += after[2] - before[2]
        self.iterations += after[3] - before[3]
        self.callbacks += after[4] - before[4]

    def wakeups_per(self, rounds: int) -> str:
        return f"{self.iterations / rounds:.1f} loop iterations ({self.callbacks / rounds:.1f} callbacks)"


class _Timeline:
    """When each hatp call of the trip under way went out and came back (seconds from the trip's start), and
    where the trip's time went, piece by piece, printed as the median over the rounds."""

    STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("prepare", ("seat", "room", "event", "pay")),
        ("commit", ("event",)),
        ("commit", ("pay",)),
        ("commit", ("seat", "room")),
    )

    def __init__(self) -> None:
        self.t0 = 0.0
        self.calls: dict[tuple[str, str], tuple[float, float]] = {}
        self.pieces: dict[str, dict[str, list[float]]] = {}

    def start(self) -> None:
        self.t0, self.calls = time.perf_counter(), {}

    async def timed(self, phase: str, branch_id: str, call: Awaitable[R]) -> R:
        sent = time.perf_counter() - self.t0
        answer = await call
        self.calls[phase, branch_id] = (sent, time.perf_counter() - self.t0)
        return answer

    def end(self, side: str) -> None:
        """The trip ended now: its pieces (the rounds of calls, what came between, before and after) are kept."""
        total, at = time.perf_counter() - self.t0, 0.0
        names = ("4 prepares", "calendar commit", "payment commit", "both holds' commits")
        pieces: list[tuple[str, float]] = []
        for name, (phase, branches) in zip(names, self.STEPS, strict=True):
            sent = min(self.calls[phase, b][0] for b in branches)
            answered = max(self.calls[phase, b][1] for b in branches)
            pieces += [("before" if not pieces else "between", sent - at), (name, answered - sent)]
            at = answered
        pieces.append(("after", total - at))
        kept = self.pieces.setdefault(side, {})
        for i, (name, seconds) in enumerate(pieces):
            kept.setdefault(f"{i:02d} {name}", []).append(seconds)

    def report(self, side: str) -> str:
        return " | ".join(
            f"{key[3:]} {statistics.median(v) * 1000:.2f}" for key, v in sorted(self.pieces[side].items())
        )


class _TimedParticipant:
    """The MCP participant, with its prepares and commits timed on the timeline (everything else passed on)."""

    def __init__(self, inner: Participant, timeline: _Timeline) -> None:
        self._inner = inner
        self._timeline = timeline

    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        return await self._timeline.timed("prepare", req.branch_id, self._inner.prepare(req))

    async def commit(self, req: CommitRequest) -> BranchResult:
        return await self._timeline.timed("commit", req.branch_id, self._inner.commit(req))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def _replay(
    clients: dict[str, Client],
    plan: Plan,
    coordinator: str,
    timeline: _Timeline,
    sign: Signer,
    record: dict[str, Any],
) -> float:
    """The trip's 8 hatp requests again, the same shape and in the same rounds (4 prepares together, then the
    calendar, the payment, both holds together), each carrying the coordinator's auth (and a commit the record's
    decision and the branch's vote, HATP-TRUST-7), answered from each participant's stored first answer
    (HATP-PART-6): the transport, the SDK and the sender's proof, none of the rest of HATP's work. Returns when
    (perf_counter) the payment's commit was answered: the point where the trip tells the agent its outcome, before
    the holds' commits (HATP-TXN-25). Raises when an answer is not the stored ok."""
    by_branch = {b.branch_id: clients[NAMES[b.participant]] for b in plan.branches}
    digest = plan.digest()
    prepared: dict[str, dict[str, Any]] = {}
    decision = next(e for e in record["events"] if e["event"] == "decision")

    async def prepare(branch_id: str) -> None:
        req = PrepareRequest(
            txn_id=plan.txn_id, branch_id=branch_id, plan_digest=digest, plan=plan, coordinator=coordinator
        )
        call = call_raw(by_branch[branch_id], "hatp/txn/prepare", sign("prepare", req.wire()), 10)
        prepared[branch_id] = await timeline.timed("prepare", branch_id, call)

    async def commit(branch_id: str) -> None:
        pre = Preconditions.model_validate(prepared[branch_id]["receipt"].get("preconditions") or {})
        req = CommitRequest(
            txn_id=plan.txn_id,
            branch_id=branch_id,
            plan_digest=digest,
            preconditions=pre,
            decision=decision,
            vote_digest=digest_of(prepared[branch_id]["vote"]),
        )
        call = call_raw(by_branch[branch_id], "hatp/txn/commit", sign("commit", req.wire()), 10)
        answer = await timeline.timed("commit", branch_id, call)
        if answer["receipt"].get("outcome") != "ok":
            raise RuntimeError(f"replayed commit of {branch_id} answered {answer['receipt'].get('outcome')}")

    timeline.start()
    async with anyio.create_task_group() as tg:
        for b in plan.branches:
            tg.start_soon(prepare, b.branch_id)
    told = 0.0
    for step in (["event"], ["pay"], ["seat", "room"]):
        async with anyio.create_task_group() as tg:
            for branch_id in step:
                tg.start_soon(commit, branch_id)
        if step == ["pay"]:
            told = time.perf_counter()
    return told


def _signatures(record: dict[str, Any]) -> tuple[int, int]:
    """(signatures made in the coordinator's process, signatures it verifies) for one trip's record: each event
    the coordinator signs, plus the in-process approver's evidence (bench: the scripted gateway); each piece of
    evidence from another party verified once (the keyring remembers it for the close-time check, HATP-REC-17)."""
    events = record["events"]
    evidence = [e["evidence"] for e in events if isinstance(e.get("evidence"), dict)]
    approver = sum(1 for e in events if str(e.get("author", "")).startswith("gateway:") and "evidence" in e)
    return len(events) + approver, len(evidence)


def _crypto_seconds(record: dict[str, Any], n: int = 300) -> tuple[float, float]:
    """CPU seconds of one Ed25519 signature and one verification over this trip's own event bytes, timed alone on
    this thread (`cryptography`, as the coordinator signs and verifies): the least what the record costs."""
    key = SigningKey.generate(["coordinator"])
    public = PublicKeyEntry.from_jwk(key.public_jwk()).key
    message = signing_bytes(record["events"][-1])
    sig = b64u_decode(key.sign(message))
    t0 = time.thread_time()
    for _ in range(n):
        key.sign(message)
    t1 = time.thread_time()
    for _ in range(n):
        public.verify(sig, message)
    t2 = time.thread_time()
    return (t1 - t0) / n, (t2 - t1) / n


async def _bench(data: Path, rounds: int, concurrent: int, profile: int, wakeups: Wakeups) -> None:
    clock = SystemClock()
    async with AsyncExitStack() as stack:
        timeline = _Timeline()
        clients, runtime, _ring, sign = await open_suite(stack, data, clock, lambda p: _TimedParticipant(p, timeline))
        hatp: list[float] = []
        to_close: list[float] = []
        direct: list[float] = []
        replay: list[float] = []  # the 8 requests, to the holds' commits' answers
        replay_told: list[float] = []  # the same, to the payment's answer: where the trip tells the agent
        cpu_hatp, cpu_direct, cpu_replay = _Cpu(wakeups), _Cpu(wakeups), _Cpu(wakeups)
        for i in range(rounds + 3):  # interleaved; the first 3 rounds warm up
            plan = plan_for(f"txn-bench-{i}", clock.now(), f"d{i}", f"s{i}")  # the agent's input, built beforehand
            c0 = cpu_hatp.measure()
            t0 = time.perf_counter()
            timeline.start()
            told: list[float] = []  # when the agent could be told the outcome (HATP-TXN-25)
            result = await runtime.run(plan, on_decided=lambda _o: told.append(time.perf_counter()))  # noqa: B023
            closed_at = time.perf_counter()  # the holds confirmed and the record closed, after the answer
            t1 = told[0] if told else closed_at
            if i >= 3:
                timeline.end("HATP")
                to_close.append(closed_at - t0)
            c1 = cpu_direct.measure()
            direct_at = time.perf_counter()  # after the close: the direct side never holds the holds' commits
            await clients["airline"].call_tool("seat_book", {"resource": f"LH123/bench/x{i}", "holder": "bench"})
            await clients["hotel"].call_tool("room_book", {"resource": f"Adlon/x{i}", "holder": "bench"})
            await clients["calendar"].call_tool("event_book", {"resource": f"dana/x{i}", "holder": "bench"})
            await clients["payments"].call_tool("card_book", {"resource": f"tok/x{i}", "holder": "bench"})
            t2 = time.perf_counter()
            c2 = cpu_direct.measure()
            if result.outcome.value != "COMMITTED":
                raise RuntimeError(f"bench trip {i} ended {result.outcome.value}")
            told_at = await _replay(clients, plan, runtime.config.coordinator, timeline, sign, result.record)
            t3 = time.perf_counter()
            c3 = cpu_replay.measure()
            if i >= 3:
                timeline.end("replay")
                hatp.append(t1 - t0)
                direct.append(t2 - direct_at)
                replay.append(t3 - t2)
                replay_told.append(told_at - t2)
                cpu_hatp.add(c0, c1)  # each side's own window: the HATP window never holds the direct calls
                cpu_direct.add(c1, c2)
                cpu_replay.add(c2, c3)
        p50_hatp, p50_direct = statistics.median(hatp), statistics.median(direct)
        ratio = p50_hatp / p50_direct
        fsync = report.fsync_cost(data)
        for side in SIDES:
            print(f"  {side}")
        print(f"trip p50 with HATP      {p50_hatp * 1000:8.2f} ms  ({rounds} rounds, stdio, 4 server processes)")
        print(
            f"  to the closed record  {statistics.median(to_close) * 1000:8.2f} ms  (the holds confirmed after the "
            "answer, off the agent's path)"
        )
        print(f"same tools direct p50   {p50_direct * 1000:8.2f} ms")
        per_round = report.Spread.of(h / d for h, d in zip(hatp, direct, strict=True))
        print(f"ratio                   {ratio:8.2f}x  of the p50s; per round {per_round.show(unit='x')}")
        p50_replay, p50_told = statistics.median(replay), statistics.median(replay_told)
        print(
            f"the 8 requests replayed {p50_replay * 1000:8.2f} ms  (same rounds and payloads, answered from stored "
            f"answers: transport and SDK alone, {p50_replay / p50_direct:.2f}x direct)"
        )
        print(
            f"  to the payment's answer {p50_told * 1000:6.2f} ms  (the 6 requests before the point where the trip "
            f"tells the agent, {p50_told / p50_direct:.2f}x direct); HATP's own work adds "
            f"{(p50_hatp - p50_told) * 1000:.2f} ms there"
        )
        # The figure ends where the agent is told (the holds' commits follow it), so its floor ends there too.
        sign_s, verify_s = _crypto_seconds(result.record)
        crypto = CRITICAL_SIGNS * sign_s + CRITICAL_VERIFIES * verify_s
        floors = report.Spread.of(
            (r + CRITICAL_FSYNCS * fsync.median + crypto) / d for r, d in zip(replay_told, direct, strict=True)
        )
        speed = "slow" if fsync.median > SLOW_FSYNC else "fast"
        print(
            f"fsync in the data directory, same run: {fsync.show(1e3, 'ms')} ({speed}: the goal holds either way); "
            f"the latency floor, the replay to the payment's answer plus the trip's critical path (the replay "
            f"writes and signs nothing of it): {CRITICAL_FSYNCS} fsyncs, {CRITICAL_SIGNS} signatures and "
            f"{CRITICAL_VERIFIES} verifications ({sign_s * 1e6:.0f} / {verify_s * 1e6:.0f} us), over direct: "
            f"{floors.show(unit='x')}"
        )
        report.record("trip_latency", per_round, floors, note=f"fsync {speed}")
        print("where the time goes, ms (median of each piece; 'before', 'between', 'after': the coordinator's own")
        print("  work between the rounds of calls, nothing but the request building when replayed):")
        print(f"  HATP    {timeline.report('HATP')}")
        print(f"  replay  {timeline.report('replay')}")
        if cpu_hatp.kids:
            print(
                f"CPU per trip, HATP      {cpu_hatp.own / rounds * 1000:8.2f} ms coordinator + "
                f"{cpu_hatp.servers / rounds * 1000:.2f} ms in the 4 servers"
            )
            print(
                f"CPU per trip, direct    {cpu_direct.own / rounds * 1000:8.2f} ms client + "
                f"{cpu_direct.servers / rounds * 1000:.2f} ms in the 4 servers ({os.cpu_count()} cores)"
            )
            print(
                f"CPU per trip, replayed  {cpu_replay.own / rounds * 1000:8.2f} ms coordinator + "
                f"{cpu_replay.servers / rounds * 1000:.2f} ms in the 4 servers (the 8 requests: transport, SDK and "
                "the sender's proof)"
            )
            if cpu_direct.own > 0:
                cpu_ratio = cpu_hatp.own / cpu_direct.own
                print(f"coordinator CPU per trip / the direct client's per four calls: {cpu_ratio:.2f}x")
                print(
                    f"  of which the 8 requests alone (replayed) make {cpu_replay.own / cpu_direct.own:.2f}x: twice "
                    "the requests, each with HATP's larger payloads and the coordinator's auth signed"
                )
                signs, verifies = _signatures(result.record)
                log_thread = (cpu_hatp.own - cpu_hatp.main) / rounds
                floor = cpu_replay.own / rounds + signs * sign_s + verifies * verify_s + log_thread
                print(
                    f"  the coordinator's CPU: {cpu_hatp.main / rounds * 1000:.2f} ms its event loop + "
                    f"{log_thread * 1000:.2f} ms the durable log's thread (SQLite, fsync: the forced writes, "
                    "HATP-TXN-4)"
                )
                print(
                    "  the floor with the evidence and the SDK as they are: the 8 requests replayed + "
                    f"{signs} signatures and {verifies} verifications timed alone ({sign_s * 1e6:.0f} / "
                    f"{verify_s * 1e6:.0f} us) + the log's thread = {floor * 1000:.2f} ms, "
                    f"{floor * rounds / cpu_direct.own:.2f}x the direct client's: everything else HATP does in the "
                    "coordinator (parsing and checking evidence, the machine, canonical forms, its tasks) has "
                    f"{(cpu_hatp.own - floor * rounds) / rounds * 1000:.2f} ms now"
                )
                report.record("coordinator_cpu", cpu_hatp.own / rounds * 1000, floor * 1000, note="ms, all rounds")
        if cpu_hatp.iterations:
            print(
                f"event-loop wakeups per trip (this process): HATP {cpu_hatp.wakeups_per(rounds)}, direct "
                f"{cpu_direct.wakeups_per(rounds)}, replayed {cpu_replay.wakeups_per(rounds)}"
            )
        if profile > 0:  # after the measured rounds: the profiler's own cost never enters their figures
            await _profile(runtime, clock, profile)
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


async def _profile(runtime: Any, clock: SystemClock, trips: int, top: int = 30) -> None:
    """`trips` more trips under cProfile on this thread's CPU clock (waiting costs nothing, the profiler's own
    overhead inflates Python calls about threefold): the coordinator's event loop only (its log thread is printed
    apart above). Prints the functions with the most own time and the modules' shares."""
    profiler = cProfile.Profile(time.thread_time)
    for i in range(trips):
        plan = plan_for(f"txn-bench-p{i}", clock.now(), f"p{i}", f"p{i}")
        profiler.enable()
        await runtime.run(plan)
        profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    total = stats.total_tt  # type: ignore[attr-defined]
    by_module: dict[str, float] = {}
    rows = []
    for (file, line, name), (_cc, calls, own, cum, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        part = _module_of(file, name)
        by_module[part] = by_module.get(part, 0.0) + own
        rows.append((own, cum, calls, f"{_short(file)}:{line}({name})" if line else name))
    print(f"profile of {trips} trips, the coordinator's event loop ({total / trips * 1000:.1f} ms/trip profiled):")
    print("  own time by part: " + ", ".join(f"{k} {v / total:.0%}" for k, v in _top(by_module, 12)))
    print("  own%   cum%  calls/trip  function")
    for own, cum, calls, where in sorted(rows, reverse=True)[:top]:
        print(f"  {own / total:5.1%} {cum / total:6.1%} {calls / trips:8.1f}  {where}")


def _module_of(file: str, name: str) -> str:
    """A short name for where a function lives: the package under site-packages, hatp_mcp's subpackage, the
    stdlib module, or the builtin's name."""
    if "site-packages/" in file:
        return file.split("site-packages/", 1)[1].split("/", 1)[0]
    if "hatp_mcp/" in file:
        return "hatp_mcp." + ".".join(file.split("hatp_mcp/", 1)[1].removesuffix(".py").split("/")[:2])
    if file == "~":
        return "builtin " + (name.split("'")[1] if "'" in name else name)
    return Path(file).stem


def _short(file: str) -> str:
    """A source file's path from its package on (site-packages/ and the worktree cut off)."""
    for cut in ("site-packages/", "/hatp_mcp/", "/bench/", "/demo/"):
        if cut in file:
            head = cut.strip("/") + "/" if cut != "site-packages/" else ""
            return head + file.split(cut, 1)[1]
    return Path(file).name


def _top(shares: dict[str, float], n: int) -> list[tuple[str, float]]:
    return sorted(shares.items(), key=lambda kv: -kv[1])[:n]


async def _bounded_bench(data: Path, rounds: int, concurrent: int, profile: int, count: bool) -> None:
    wakeups = Wakeups()
    with anyio.fail_after(600):
        if count:
            with wakeups.counting():
                await _bench(data, rounds, concurrent, profile, wakeups)
        else:
            await _bench(data, rounds, concurrent, profile, wakeups)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.mcp_trip")
    parser.add_argument("--rounds", type=int, default=report.rounds(30, 3))
    parser.add_argument("--concurrent", type=int, default=report.rounds(16, 2))
    parser.add_argument("--profile", type=int, default=0, metavar="TRIPS", help="profile TRIPS more trips (cProfile)")
    parser.add_argument(
        "--wakeups", action="store_true", help="count this process's event-loop iterations and callbacks per trip"
    )
    args = parser.parse_args(argv if argv is not None else sys.argv[1:] if __name__ == "__main__" else [])
    quiet()
    with tempfile.TemporaryDirectory(prefix="hatp-bench-") as tmp:
        anyio.run(_bounded_bench, Path(tmp), args.rounds, args.concurrent, args.profile, args.wakeups)
    return 0


if __name__ == "__main__":
    raise SystemExit(report.alone("mcp_trip", lambda: main(sys.argv[1:])))

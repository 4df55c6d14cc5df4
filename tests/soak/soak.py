"""The fault-injection soak: many trips in one process, every participant call passing through a fault injector,
the coordinator killed at random durable points and recovered by a fresh one on the same log.

Faults, drawn per call from a seeded generator (`--seed`): the call never reaches the participant (unreachable,
a timeout before it arrives), the participant refuses it, its answer is lost after the effect happened, it is
delivered twice, or it is slow (answers come back in another order). A participant process killed and
restarted is what tests/crash does with real processes; here the participants live on. Per transaction, with a
given probability, the coordinator dies right after its k-th durable append (k drawn; whatever it had not yet
forced is lost, as in a crash) and a new coordinator on the same log recovers the transaction; calls already at
a participant finish there, as they would in another process.

Each transaction is then checked:
- all or nothing: COMMITTED means the seat and the room were booked, the event created and not deleted, the card
  captured; ABORTED means nothing was booked or captured and every event created was deleted; NEEDS_RECOVERY
  (a final step in doubt) means at most one capture, nothing guessed, and is counted apart;
- no effect twice (one hold, one booking, one capture, one event per transaction at most);
- its record verifies offline (hatp_mcp.core.txn.record.verify_record), so its outcome is justified by its
  evidence as far as the verifier checks it;
- no ask left open: the approver's ask is decided or withdrawn.

`make soak` runs 10,000; the suite runs a few hundred (tests/soak/test_soak.py). Prints counts per fault and per
outcome, and the violations found (exit 1 when any).

Run: `.venv/bin/python -m tests.soak.soak [--n N] [--seed S] [--concurrency C] [--crash-rate P]`
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.driver import CoordinatorRuntime, default_validator
from hatp_mcp.runtime.interfaces import Participant
from hatp_mcp.store.txn_log import LogEntry, LoggedTxn, MemoryTxnLog

__all__ = ["FAULTS", "Report", "soak"]

# (fault, weight): most calls go through untouched.
FAULTS: tuple[tuple[str, int], ...] = (
    ("none", 80),
    ("unreachable", 3),
    ("refused", 3),
    ("lost-answer", 4),
    ("duplicate", 4),
    ("slow", 4),
)
IDLE_TURNS = 200  # event-loop turns without a jump: enough for every in-process call to finish or wait


class CoordinatorDied(BaseException):
    """The coordinator process is gone (raised from its log, like a kill between two durable points)."""


@dataclass
class Report:
    outcomes: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    violations: list[str] = field(default_factory=list)


class DyingLog:
    """A MemoryTxnLog that can kill its coordinator right after a chosen append of a chosen transaction."""

    def __init__(self, inner: MemoryTxnLog) -> None:
        self.inner = inner
        self.die_after: dict[str, int] = {}  # txnId -> appends to survive
        self.appends: Counter[str] = Counter()

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        await self.inner.append(txn_id, entries, forced)
        self.appends[txn_id] += 1
        left = self.die_after.get(txn_id)
        if left is not None and self.appends[txn_id] >= left:
            del self.die_after[txn_id]
            raise CoordinatorDied(f"killed after durable append {self.appends[txn_id]} of {txn_id}")

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return await self.inner.load(txn_id)

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()


class FaultyParticipant:
    """Stands between the coordinator and one participant runtime and injects one drawn fault per call."""

    def __init__(self, world: World, uri: str, rng: random.Random, report: Report) -> None:
        self._world = world
        self._uri = uri
        self._rng = rng
        self._report = report
        self._weights = [w for _, w in FAULTS]
        self._names = [f for f, _ in FAULTS]

    async def _call(self, method: str, req: Any) -> Any:
        fault = self._rng.choices(self._names, self._weights)[0]
        self._report.faults[f"{method}:{fault}"] += 1
        if fault == "unreachable":
            raise ConnectionError("injected: the call never reached the participant")
        if fault == "refused":
            raise HatpError("HATP-TXN-2", "injected: the participant refused the call", code="INJECTED_REFUSAL")
        runtime = self._world.participants[self._uri]
        if fault == "slow":
            for _ in range(self._rng.randint(1, 30)):
                await asyncio.sleep(0)  # other answers overtake this one
        # the participant finishes what reached it even if the coordinator dies meanwhile (another process)
        work = asyncio.ensure_future(getattr(runtime, method)(req))
        if fault == "duplicate":
            first = await asyncio.shield(work)
            work = asyncio.ensure_future(getattr(runtime, method)(req))
            second = await asyncio.shield(work)
            assert type(first) is type(second)
            return second
        answer = await asyncio.shield(work)
        if fault == "lost-answer":
            raise ConnectionError("injected: the answer was lost after the participant acted")
        return answer

    async def prepare(self, req: Any) -> Any:
        return await self._call("prepare", req)

    async def commit(self, req: Any) -> Any:
        return await self._call("commit", req)

    async def abort(self, req: Any) -> Any:
        return await self._call("abort", req)

    async def compensate(self, req: Any) -> Any:
        return await self._call("compensate", req)

    async def renew(self, req: Any) -> Any:
        return await self._call("renew", req)

    async def status(self, req: Any) -> Any:
        return await self._call("status", req)


def _count(effects: list[str], verb: str, txn_id: str) -> int:
    return effects.count(f"{verb} {txn_id}")


def check(world: World, txn_id: str, outcome: str, record: dict[str, Any]) -> list[str]:
    """What is wrong with one finished transaction (empty: nothing)."""
    e = world.effects()
    booked = {n: _count(e[n], "book", txn_id) for n in ("seat", "room")}
    held = {n: _count(e[n], "hold", txn_id) for n in ("seat", "room")}
    created = _count(e["event"], "create", txn_id)
    deleted = e["event"].count(f"delete evt-{txn_id}")
    captured = _count(e["pay"], "capture", txn_id)
    out: list[str] = []
    twice = {k: v for k, v in {**booked, **{f"hold {k}": v for k, v in held.items()}}.items() if v > 1}
    if twice or created > 1 or captured > 1 or deleted > 1:
        out.append(f"an effect happened twice: {twice} created={created} deleted={deleted} captured={captured}")
    if outcome == "COMMITTED":
        if booked != {"seat": 1, "room": 1} or created != 1 or deleted != 0 or captured != 1:
            out.append(f"COMMITTED but booked={booked} created={created} deleted={deleted} captured={captured}")
    elif outcome == "ABORTED":
        if any(booked.values()) or captured or created != deleted:
            out.append(f"ABORTED but booked={booked} created={created} deleted={deleted} captured={captured}")
    elif outcome != "NEEDS_RECOVERY":
        out.append(f"unknown outcome {outcome}")
    problems = verify_record(record, world.keyring)
    if problems:
        out.append("record does not verify: " + "; ".join(f"{p.rule} {p.reason}" for p in problems[:3]))
    for (t, rid), ask in world.approver.asks.items():
        if t == txn_id and ask.answer is None and not ask.withdrawn and outcome != "NEEDS_RECOVERY":
            out.append(f"ask {rid} left open after {outcome}")
    return [f"{txn_id}: {p}" for p in out]


async def soak(n: int, *, seed: int = 1, concurrency: int = 16, crash_rate: float = 0.05) -> Report:
    rng = random.Random(seed)
    report = Report()
    clock = FakeClock()  # time jumps to the next deadline whenever everything waits (see _autojump)
    log = DyingLog(MemoryTxnLog())
    world = build_world(clock, log=log)
    routes: dict[str, Participant] = {uri: FaultyParticipant(world, uri, rng, report) for uri in world.participants}
    limiter = asyncio.Semaphore(concurrency)

    def coordinator() -> CoordinatorRuntime:
        """A fresh coordinator process on the same log, every call going through the injector."""
        return CoordinatorRuntime(
            key=world.keys["coordinator"],
            keyring=world.keyring,
            participants=routes,
            approver=world.approver,
            log=log,
            clock=clock,
            config=Config(coordinator="coordinator://acme.com/c1"),
            validator=default_validator(),
            keep_trace=False,
        )

    async def one(i: int) -> None:
        txn_id = f"txn-soak-{seed}-{i}"
        async with limiter:
            plan = trip_plan(clock.now(), txn_id)  # fresh when it starts: the fake clock moves on meanwhile
            if rng.random() < crash_rate:
                log.die_after[txn_id] = rng.randint(1, 6)
            try:
                result = await coordinator().run(plan)
            except CoordinatorDied:
                report.crashes += 1
                result = await coordinator().recover(txn_id)
        outcome = result.outcome.value
        report.outcomes[outcome] += 1
        report.violations += check(world, txn_id, outcome, result.record)

    done = asyncio.Event()
    jumper = asyncio.ensure_future(_autojump(clock, done))
    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        done.set()
        await jumper
    return report


async def _autojump(clock: FakeClock, done: asyncio.Event) -> None:
    """Move the fake clock to the next deadline once every other task has had its turns: a retry 30 s out, a lease
    renewal, a call's bound. A call that is still busy then (a slow answer) meets its bound: one more fault."""
    while not done.is_set():
        for _ in range(IDLE_TURNS):
            await asyncio.sleep(0)
        deadline = clock.next_deadline()
        if deadline is not None:
            clock.set(max(deadline, clock.now()))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests.soak.soak")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--crash-rate", type=float, default=0.05)
    args = p.parse_args(argv)
    report = asyncio.run(soak(args.n, seed=args.seed, concurrency=args.concurrency, crash_rate=args.crash_rate))
    print(f"{args.n} transactions, seed {args.seed}, {report.crashes} coordinator crashes recovered")
    for outcome, count in sorted(report.outcomes.items()):
        print(f"  outcome {outcome:16} {count:>7,}")
    for fault, count in sorted(report.faults.items()):
        print(f"  fault   {fault:24} {count:>7,}")
    print(f"  violations {len(report.violations)}")
    for v in report.violations[:20]:
        print(f"    {v}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())

"""The soak's real-process mode: the coordinator and the four tool servers as separate processes over streamable
HTTP, trips driven by an agent over MCP, and processes SIGKILLed at random moments and started again on the same
port and data (a participant mid-prepare or mid-commit, the coordinator between any two of its durable writes).

The approver is the coordinator's scripted one (`--scripted-approver approve`): the faults here are the processes'
deaths, not people. Each trip books its own seat, room, calendar slot and card, so trips never contend; every
fifth trip pays with a card blocked beforehand, so it must abort. When
every trip has ended, each is checked against what the servers' own databases hold:
- all or nothing, read from each server's effect ledger: COMMITTED means the seat, the room, the calendar event
  and the capture were each made and the event not undone; ABORTED means no seat, room or capture was made and an
  event made was undone; NEEDS_RECOVERY (a final step in doubt) is counted apart;
- no hold is left behind (no inventory item still `held` by the transaction);
- its record verifies offline against every party's public key (hatp_mcp.core.txn.record.verify_record).
No effect twice is the servers' effect ledger's own guarantee (one row per idempotency key and kind), so it is not
counted here as a check; the in-process soak (tests/soak/soak.py) counts effects itself.

Run: `.venv/bin/python -m tests.soak.processes [--n N] [--concurrency C] [--kills K] [--seed S]`
(`make soak-processes`; the suite runs a bounded form in tests/soak/test_processes.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from mcp import Client

from demo.trip_world import trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.mcp.http_callers import local_caller
from hatp_mcp.mcp.launch import HttpProcess, launch_http
from hatp_mcp.runtime.coordinator.scripted_approver import SCRIPTED_GATEWAY
from hatp_mcp.runtime.coordinator_trust import trust_coordinator
from servers._inventory import Inventory

__all__ = ["Report", "soak_processes"]

COORDINATOR_ID = "coordinator://localhost"  # servers.coordinator's default --id

SERVERS = ("airline", "hotel", "calendar", "payments")
BRANCH_OF = {"airline": "seat", "hotel": "room", "calendar": "event", "payments": "pay"}
READY_SECONDS = 60.0
BLOCKED_EVERY = 5  # trips 0, 5, 10, ... pay with a blocked card: they must abort (payments votes no)
MAX_ATTEMPTS = 200  # per request: a coordinator killed and started again a few times meanwhile


def uri(name: str) -> str:
    return f"mcp://{name}.example/hatp"


@dataclass
class Report:
    outcomes: Counter[str] = field(default_factory=Counter)
    kills: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    violations: list[str] = field(default_factory=list)


class _Served:
    """One server process that can be killed and started again on the same port and data. `run` supervises it in
    its own task (the launcher's task group lives in the task that entered it); `kill` and `stop` ask it."""

    def __init__(self, name: str, module: str, data: Path, extra: list[str], token: str | None = None) -> None:
        self.name, self.module, self.data, self.extra, self.token = name, module, data, extra, token
        self.proc: HttpProcess | None = None
        self.up = anyio.Event()  # set while the process answers; a new one after each kill
        self._kill = anyio.Event()
        self._stopping = False

    @property
    def url(self) -> str:
        assert self.proc is not None
        return self.proc.url

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        port, first = 0, True
        while True:
            async with launch_http(
                self.module, self.data, port=port, extra=self.extra, ready_timeout=READY_SECONDS, token=self.token
            ) as p:
                self.proc, port = p, p.port
                self.up.set()
                if first:
                    task_status.started()
                    first = False
                await self._kill.wait()
                self._kill = anyio.Event()
                if self._stopping:
                    return
                p.kill()  # SIGKILL: whatever it had not made durable is lost
                await p.process.wait()

    def kill(self) -> None:
        """SIGKILL the process; it is started again at once on the same port and data."""
        self.up = anyio.Event()
        self._kill.set()

    def stop(self) -> None:
        self._stopping = True
        self._kill.set()


def _card(i: int, seed: int) -> str:
    return f"tok_soak_{seed}_{i}"


def _plan(i: int, seed: int) -> Plan:
    """Trip `i`: its own seat, check-in date (room and calendar slot) and card, so no two trips contend."""
    txn_id = f"txn-psoak-{seed}-{i}"
    data = trip_plan(datetime.now(UTC), txn_id).wire()
    check_in = (date(2027, 3, 1) + timedelta(days=i)).isoformat()
    args = {
        "seat": {"date": "2026-12-10", "seat": f"{i // 6 + 1}{'ABCDEF'[i % 6]}"},
        "room": {"checkIn": check_in},
        "event": {"start": f"{check_in}T09:00:00Z"},
        "pay": {"card": _card(i, seed)},
    }
    for branch in data["branches"]:
        branch["args"].update(args.get(branch["branchId"], {}))
    return Plan.model_validate(data)


class _Agent:
    """The agent: a fresh MCP session per request, so a coordinator killed in between is simply asked again."""

    def __init__(self, coordinator: _Served, report: Report) -> None:
        self.coordinator = coordinator
        self.report = report

    async def _call(self, method: str, params: dict[str, Any], read: float) -> dict[str, Any]:
        for _ in range(MAX_ATTEMPTS):
            up = self.coordinator.up
            await up.wait()
            try:
                assert self.coordinator.proc is not None  # set before `up`
                async with self.coordinator.proc.client() as client:
                    return await call_raw(client, method, params, read)
            except HatpError as exc:
                if exc.code not in ("TIMEOUT", "CONNECTION_CLOSED", "UNREACHABLE"):
                    raise
            except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError, ExceptionGroup):
                pass  # the coordinator died under this request: ask again once it is back
            self.report.retries += 1
        raise RuntimeError(f"{method} got no answer in {MAX_ATTEMPTS} attempts")

    async def run(self, plan: Plan) -> dict[str, Any]:
        status = await self._call("hatp/txn/begin", plan.wire(), 30)
        while not status.get("closed"):  # the outcome, then the closed record (HATP-MCP-66)
            status = await self._call("hatp/txn/status", {"txnId": plan.txn_id, "waitSeconds": 20}, 40)
        return status


def _keyring(data: Path) -> Keyring:
    ring = Keyring()
    for pub in data.rglob("public.jwk.json"):
        entry = PublicKeyEntry.from_jwk(json.loads(pub.read_text()))
        owner = pub.parent.name
        if owner in SERVERS:
            entry = entry.with_party(uri(owner))
        elif owner == "scripted-gateway":
            entry = entry.with_party(SCRIPTED_GATEWAY)
        ring.add(entry)
    return ring


@dataclass
class Holdings:
    """What the servers' own databases hold after the run: each server's inventory items by holder, and its effect
    ledger (one row per idempotency key `<txnId>:<branchId>` and kind, `commit` or `undo`)."""

    items: dict[str, dict[str, str]]  # server -> {holder txnId: state}
    effects: dict[str, set[tuple[str, str]]]  # server -> {(key, kind)}

    def made(self, server: str, txn_id: str, kind: str) -> bool:
        return (f"{txn_id}:{BRANCH_OF[server]}", kind) in self.effects[server]


def check(txn_id: str, outcome: str, record: dict[str, Any], held: Holdings, ring: Keyring) -> list[str]:
    """What is wrong with one finished trip (empty: nothing)."""
    made = {name: held.made(name, txn_id, "commit") for name in SERVERS}
    undone = held.made("calendar", txn_id, "undo")
    holds = {name: "held" for name in SERVERS if held.items[name].get(txn_id) == "held"}
    out: list[str] = []
    if holds:
        out.append(f"{outcome} with holds left behind: {sorted(holds)}")
    if outcome == "COMMITTED" and (not all(made.values()) or undone):
        out.append(f"COMMITTED but the effects made are {made}, the event undone: {undone}")
    elif outcome == "ABORTED" and (made["airline"] or made["hotel"] or made["payments"] or made["calendar"] != undone):
        out.append(f"ABORTED but the effects made are {made}, the event undone: {undone}")
    elif outcome not in ("COMMITTED", "ABORTED", "NEEDS_RECOVERY"):
        out.append(f"unknown outcome {outcome}")
    problems = verify_record(record, ring)
    if problems:
        out.append("record does not verify: " + "; ".join(f"{p.rule} {p.reason}" for p in problems[:3]))
    return [f"{txn_id}: {p}" for p in out]


def _holdings(data: Path) -> Holdings:
    items: dict[str, dict[str, str]] = {}
    effects: dict[str, set[tuple[str, str]]] = {}
    for name in SERVERS:
        inventory = Inventory(data / name / "state.db")
        try:
            items[name] = {i.holder: i.state for i in inventory.all() if i.holder is not None}
            effects[name] = {(e.key, e.kind) for e in inventory.effects()}
        finally:
            inventory.close()
    return Holdings(items, effects)


async def soak_processes(
    n: int,
    *,
    seed: int = 1,
    concurrency: int = 8,
    kills: int = 6,
    victims: Sequence[str] = (),
    data: Path | None = None,
) -> Report:
    """`n` trips over real processes with `kills` SIGKILLs spread over the run (each a random server, the
    coordinator among them; `victims` names them in order instead); every trip then checked."""
    rng = random.Random(seed)
    report = Report()
    with contextlib.ExitStack() as files:
        root = data or Path(files.enter_context(tempfile.TemporaryDirectory(prefix="hatp-psoak-")))
        trust_coordinator(root / "coordinator", COORDINATOR_ID, [root / name for name in SERVERS])
        # --demo-tools on payments: its card_change blocks the cards of the trips that must abort
        servers = {
            name: _Served(name, f"servers.{name}", root / name, ["--demo-tools"] if name == "payments" else [])
            for name in SERVERS
        }
        results: dict[str, dict[str, Any]] = {}
        async with anyio.create_task_group() as procs:
            for s in servers.values():
                await procs.start(s.run)
            args = [f"--participant={uri(name)}={s.url}" for name, s in servers.items()]
            args += [f"--participant-keys={uri(name)}={root / name / 'public.jwk.json'}" for name in SERVERS]
            args += ["--scripted-approver", "approve", "--retry-seconds", "1", "--call-timeout", "10"]
            # the agent calls it over HTTP with its own token (HATP-MCP-53)
            token = local_caller(root / "coordinator" / "callers.json", trip_plan(datetime.now(UTC)).requester.agent)
            args += ["--callers", str(root / "coordinator" / "callers.json")]
            coordinator = _Served("coordinator", "servers.coordinator", root / "coordinator", args, token)
            await procs.start(coordinator.run)
            async with Client(servers["payments"].url) as payments:
                for i in range(0, n, BLOCKED_EVERY):
                    blocked = await payments.call_tool("card_change", {"resource": _card(i, seed), "state": "gone"})
                    assert not blocked.is_error, blocked.content
            every = {**servers, "coordinator": coordinator}
            agent = _Agent(coordinator, report)
            limiter = anyio.Semaphore(concurrency)
            kills = len(victims) or kills
            kill_at = sorted(rng.sample(range(1, max(n, kills + 1)), kills))  # after how many trips began
            chosen = list(victims)

            async def one(plan: Plan, i: int) -> None:
                async with limiter:
                    while kill_at and i >= kill_at[0]:
                        kill_at.pop(0)
                        victim = chosen.pop(0) if chosen else rng.choice(sorted(every))
                        report.kills[victim] += 1
                        every[victim].kill()
                    results[plan.txn_id] = await agent.run(plan)

            try:
                async with anyio.create_task_group() as trips:
                    for i in range(n):
                        trips.start_soon(one, _plan(i, seed), i)
            finally:
                for served in every.values():
                    served.stop()
        held = _holdings(root)
        ring = _keyring(root)
        for txn_id, status in results.items():
            report.outcomes[status["outcome"]] += 1
            if int(txn_id.rsplit("-", 1)[1]) % BLOCKED_EVERY == 0 and status["outcome"] != "ABORTED":
                report.violations.append(f"{txn_id}: paid with a blocked card, yet {status['outcome']}")
            report.violations += check(txn_id, status["outcome"], status["record"], held, ring)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tests.soak.processes")
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--kills", type=int, default=20)
    args = p.parse_args(argv)
    report = anyio.run(lambda: soak_processes(args.n, seed=args.seed, concurrency=args.concurrency, kills=args.kills))
    print(f"{args.n} trips over real processes, seed {args.seed}, {sum(report.kills.values())} processes killed")
    for victim, count in sorted(report.kills.items()):
        print(f"  killed  {victim:16} {count:>5}")
    for outcome, count in sorted(report.outcomes.items()):
        print(f"  outcome {outcome:16} {count:>5}")
    print(f"  requests asked again after a kill {report.retries}")
    print(f"  violations {len(report.violations)}")
    for v in report.violations[:20]:
        print(f"    {v}")
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())

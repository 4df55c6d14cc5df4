"""A gated tool call against the same call ungated, over stdio, and the cost of `hatp verify` per event.

The gated side is demo.gated_server's `charge_card` behind `gate_tools`: every call carries a fresh approval
(made beforehand, outside the clock: the gateway and the humans are not what is measured) that the gate checks in
full (the gateway's signature, each person's proof against the Directory-signed cards, quorum, requester, the
agent's request, freshness, the call digest) and spends in its durable replay cache. The baseline is the same
server started `--ungated`. Calls alternate between the two processes, one at a time; p50 of each and their
ratio (goal: at most 1.3x). Then verify_record over signed trip records: events checked per second (goal: at
least 8,000).

Run: `.venv/bin/python -m bench.gated [CALLS]` (default 200)
"""

from __future__ import annotations

import importlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters

from bench._cpu import children, cpu_seconds, own_cpu
from demo.gated_server import REQUIRES, approval_gate, build
from hatp_mcp.core.gate.checks import APPROVAL_META_KEY
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.mcp.gate import gate_tools
from hatp_mcp.runtime.clock import FakeClock
from tests.factories import signed_trip_record

# What the gateway does when the agent asks (route, let two finance approvers decide, sign): the gate tests' own
# helper, loaded by name so the strict type check of bench/ does not take in that test module.
_gate_tests: Any = importlib.import_module("tests.mcp.test_gate_tools")
ARGS: dict[str, Any] = _gate_tests.ARGS
approve: Callable[..., dict[str, Any]] = _gate_tests.approve

ROOT = Path(__file__).resolve().parents[1]
CALL_GOAL = 1.3
VERIFY_GOAL = 8_000


def _params(db: Path, now: str, *extra: str) -> StdioServerParameters:
    org = ROOT / "spec" / "fixtures" / "org"
    args = ["-m", "demo.gated_server", "--db", str(db), "--org", str(org), "--now", now, *extra]
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))


class _Side:
    """One server process: the wall time of each call and its CPU over all of them."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.walls: list[float] = []
        self.cpu = 0.0

    def cpu_now(self) -> float:
        return cpu_seconds(self.pid) if self.pid is not None else 0.0


async def _open(stack: AsyncExitStack, params: StdioServerParameters) -> tuple[Client, int | None]:
    """A client on a new server process, and that process's id (None where /proc cannot tell)."""
    before = set(children())
    client = await stack.enter_async_context(Client(params))
    new = set(children()) - before
    return client, (new.pop() if len(new) == 1 else None)


async def calls(n: int) -> tuple[_Side, _Side, float, float]:
    """Interleaved calls to the gated and the ungated server; then the gate's own work in this process (the same
    check_call on the same kind of approval, a durable replay cache of its own): p50 wall and CPU per call."""
    clock = FakeClock()
    now = format_ts(clock.now())
    org = ROOT / "spec" / "fixtures" / "org"
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            gated_c, gated_pid = await _open(stack, _params(Path(tmp) / "gated.db", now))
            plain_c, plain_pid = await _open(stack, _params(Path(tmp) / "plain.db", now, "--ungated"))
            gated, plain = _Side(gated_pid), _Side(plain_pid)
            try:
                await gated_c.call_tool("charge_card", ARGS)
            except MCPError as exc:  # refused: the error names the call to get approved
                tool_call = (exc.data or {})["data"]["toolCall"]
            else:
                raise SystemExit("the gated server ran an unapproved call")
            # one approval per call (single use), each for its own card, so each is its own ask
            args = [{**ARGS, "card": f"tok_visa_{i:04d}"} for i in range(2 * n + 20)]
            approvals = [approve(tool_call, clock.now(), args=a) for a in args]
            for i in range(n + 10):
                meta: Any = {APPROVAL_META_KEY: approvals[i]}
                g0, t0 = gated.cpu_now(), time.perf_counter()
                r1 = await gated_c.call_tool("charge_card", args[i], meta=meta)
                t1, g1, u0 = time.perf_counter(), gated.cpu_now(), plain.cpu_now()
                r2 = await plain_c.call_tool("charge_card", args[i])
                t2, u1 = time.perf_counter(), plain.cpu_now()
                if i >= 10:  # the first rounds warm both processes
                    assert not r1.is_error and not r2.is_error, (r1, r2)
                    gated.walls.append(t1 - t0)
                    plain.walls.append(t2 - t1)
                    gated.cpu += g1 - g0
                    plain.cpu += u1 - u0
        # the gate alone, in process: what it must do for each call (list and digest the tool, every check, the
        # nonces spent in one durable commit), with no MCP around it
        server = build(Path(tmp) / "plain-again.db", org, clock, gated=False)
        gate = approval_gate(Path(tmp) / "in-process.db", org, clock)
        gate_tools(server, gate, tools={"charge_card": {"requires": REQUIRES}})
        walls: list[float] = []
        c0 = own_cpu()
        for i in range(n + 10, 2 * n + 20):
            t0 = time.perf_counter()
            await gate.check_call(server, "charge_card", args[i], approvals[i])
            walls.append(time.perf_counter() - t0)
        in_cpu = (own_cpu() - c0) / len(walls)
        gate.cache.close()
    return gated, plain, statistics.median(walls), in_cpu


def verify_rate(rounds: int = 200) -> tuple[float, int]:
    records: list[tuple[dict[str, Any], Any]] = []
    for i in range(20):
        record, ring, _ = signed_trip_record(f"txn-bench-verify-{i}")
        records.append((record, ring))
    events = sum(len(r["events"]) for r, _ in records)
    best = float("inf")
    for _ in range(max(1, rounds // 20)):
        start = time.perf_counter()
        for record, ring in records:
            problems = verify_record(record, ring)
            assert not problems, problems
        best = min(best, time.perf_counter() - start)
    return events / best, events // len(records)


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 200
    gated, plain, gate_wall, gate_cpu = anyio.run(calls, n)
    g, u = statistics.median(gated.walls), statistics.median(plain.walls)
    ratio = g / u
    print(f"a tool call over stdio, gated (approval checked, replay cache written) against ungated, {n} calls each,")
    print("  alternating (p50 wall; CPU per call of each server process)")
    print(f"  ungated (baseline)  p50 {u * 1e3:7.2f} ms   server CPU {plain.cpu / n * 1e3:6.2f} ms/call")
    print(f"  gated               p50 {g * 1e3:7.2f} ms   server CPU {gated.cpu / n * 1e3:6.2f} ms/call")
    verdict = "met" if ratio <= CALL_GOAL else "NOT met"
    print(f"  gated / ungated: {ratio:.2f}x  (goal <= {CALL_GOAL}x: {verdict})")
    if plain.cpu > 0:
        print(f"  server CPU per call, gated / ungated: {gated.cpu / plain.cpu:.2f}x")
    floor = (u + gate_wall) / u
    print(
        f"  the gate's own work in process (tool digest, every check, the nonces spent, one durable commit): "
        f"p50 {gate_wall * 1e3:.2f} ms, CPU {gate_cpu * 1e3:.2f} ms/call: the ratio cannot go below "
        f"{floor:.2f}x on this machine while that work stays (same run)"
    )
    rate, per = verify_rate()
    verdict = "met" if rate >= VERIFY_GOAL else "NOT met"
    print(f"hatp verify (verify_record) on signed trip records of {per} events")
    print(f"  {rate:,.0f} events/s  (goal >= {VERIFY_GOAL:,} events/s: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

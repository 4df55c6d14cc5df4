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
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters

from hatp_mcp.core.gate.checks import APPROVAL_META_KEY
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.txn.record import verify_record
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


async def calls(n: int) -> tuple[float, float]:
    clock = FakeClock()
    now = format_ts(clock.now())
    with tempfile.TemporaryDirectory() as tmp:
        gated_p = _params(Path(tmp) / "gated.db", now)
        plain_p = _params(Path(tmp) / "plain.db", now, "--ungated")
        async with Client(gated_p) as gated, Client(plain_p) as plain:
            try:
                await gated.call_tool("charge_card", ARGS)
            except MCPError as exc:  # refused: the error names the call to get approved
                tool_call = (exc.data or {})["data"]["toolCall"]
            else:
                raise SystemExit("the gated server ran an unapproved call")
            # one approval per call (single use), each for its own card, so each is its own ask
            args = [{**ARGS, "card": f"tok_visa_{i:04d}"} for i in range(n + 10)]
            approvals = [approve(tool_call, clock.now(), args=a) for a in args]
            g: list[float] = []
            u: list[float] = []
            for i in range(n + 10):
                approval = approvals[i]
                t0 = time.perf_counter()
                meta: Any = {APPROVAL_META_KEY: approval}
                r1 = await gated.call_tool("charge_card", args[i], meta=meta)
                t1 = time.perf_counter()
                r2 = await plain.call_tool("charge_card", args[i])
                t2 = time.perf_counter()
                if i >= 10:  # the first rounds warm both processes
                    assert not r1.is_error and not r2.is_error, (r1, r2)
                    g.append(t1 - t0)
                    u.append(t2 - t1)
    return statistics.median(g), statistics.median(u)


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
    gated, plain = anyio.run(calls, n)
    ratio = gated / plain
    print(f"a tool call over stdio, gated (approval checked, replay cache written) against ungated, {n} calls each")
    print(f"  ungated p50 (baseline) {plain * 1e3:7.2f} ms")
    print(f"  gated p50              {gated * 1e3:7.2f} ms")
    verdict = "met" if ratio <= CALL_GOAL else "NOT met"
    print(f"  gated / ungated: {ratio:.2f}x  (goal <= {CALL_GOAL}x: {verdict})")
    rate, per = verify_rate()
    verdict = "met" if rate >= VERIFY_GOAL else "NOT met"
    print(f"hatp verify (verify_record) on signed trip records of {per} events")
    print(f"  {rate:,.0f} events/s  (goal >= {VERIFY_GOAL:,} events/s: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

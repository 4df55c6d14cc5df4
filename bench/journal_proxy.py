"""A tool call through the journaling proxy against the same call made directly, over stdio, in the same run.

Every side calls the shop's `stock` (a read: the shop does no write, so what is measured is the proxy's own
cost). Three processes are called in interleaved rounds, one call at a time:
- direct: the shop itself;
- forward: a bare forwarding server (bench/_forward.py) in front of a second shop, no journal: one more stdio hop,
  the floor of any proxy;
- proxy: servers.journal_proxy in front of a third shop, its journal durable (WAL, synchronous=FULL): each call a
  step of one saga begun first, the step written before the call goes upstream and its result after, each one
  durable commit (HATP-JRN-2), each entry signed into the saga's hash-chained record;
- outside: a second journaling proxy, in front of a fourth shop, called with no saga begun: each call a saga of
  its own (HATP-PXY-9), begun in its step's write and closed in its result's (two durable commits, HATP-JRN-25).
  Printed beside the others; the goal is the proxy's call inside a saga.
In the same rounds it runs the journal's own work for one call in this process (the step started and completed in
a saga, both durable, no MCP). Prints p50 latency per side, CPU per call of each process, the proxy/direct ratio
with its goal (`journal_proxy` in bench/_report.py: a multiple of the floor that the forward hop plus the
journal's own work put under it on this machine); then calls/s with 8 calls in flight, direct and through the proxy.
Run: .venv/bin/python -m bench.journal_proxy [--calls N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench import _report as report
from bench._cpu import children, cpu_seconds, own_cpu
from hatp_mcp.mcp.launch import ROOT, stdio_params
from hatp_mcp.runtime.journal.driver import Journal, Saga
from hatp_mcp.runtime.journal.undoable import undoable
from hatp_mcp.store.journal_store import SqliteJournalStore
from servers._keys import load_or_create_key

__all__ = ["main"]


ROUNDS = 7


class _Side:
    """One side: its p50 per round, and the CPU it spent (this process's and its server processes')."""

    def __init__(self, name: str, pids: list[int]) -> None:
        self.name = name
        self.pids = pids
        self.p50s: list[float] = []
        self.calls = 0
        self.client_cpu = 0.0
        self.server_cpu = 0.0

    def servers_now(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids)

    async def round(self, call: Callable[[int], Awaitable[object]], calls: int) -> float:
        times = []
        c0, s0 = own_cpu(), self.servers_now()
        for i in range(calls):
            start = time.perf_counter()
            await call(i)
            times.append(time.perf_counter() - start)
        self.client_cpu += own_cpu() - c0
        self.server_cpu += self.servers_now() - s0
        self.calls += calls
        p50 = statistics.median(times)
        self.p50s.append(p50)
        return p50

    def cpu_line(self) -> str:
        if not self.calls:
            return ""
        own = self.client_cpu / self.calls * 1e3
        return f"CPU/call {own:5.2f} ms here + {self.server_cpu / self.calls * 1e3:5.2f} ms in its server processes"


async def _throughput(client: Client, calls: int, in_flight: int = 8) -> float:
    start = time.perf_counter()

    async def worker(n: int) -> None:
        for i in range(n):
            await client.call_tool("stock", {"item": str(i)})

    async with anyio.create_task_group() as tg:
        for _ in range(in_flight):
            tg.start_soon(worker, calls // in_flight)
    return (calls // in_flight * in_flight) / (time.perf_counter() - start)


async def _open(stack: AsyncExitStack, params: StdioServerParameters) -> tuple[Client, list[int]]:
    """A client on a new server process, and the ids of that process and its children (its upstream shop)."""
    before = set(children())
    client = await stack.enter_async_context(Client(stdio_client(params)))
    new = sorted(set(children()) - before)
    return client, [*new, *(c for p in new for c in children(p))]


async def run(calls: int) -> None:
    per_round = max(1, calls // ROUNDS)
    with tempfile.TemporaryDirectory(prefix="hatp-bench-proxy-") as tmp:
        data = Path(tmp)
        (data / "undo.json").write_text(json.dumps({"tools": {}}))
        shop = f"cmd:{sys.executable} -m servers.shop --transport stdio --data {data / 'shop-up'}"
        proxied = stdio_params(
            "servers.journal_proxy", data / "proxy", ["--upstream", shop, "--undo-map", str(data / "undo.json")]
        )
        out_shop = f"cmd:{sys.executable} -m servers.shop --transport stdio --data {data / 'shop-out'}"
        outside = stdio_params(
            "servers.journal_proxy", data / "outside", ["--upstream", out_shop, "--undo-map", str(data / "undo.json")]
        )
        fwd_shop = f"cmd:{sys.executable} -m servers.shop --transport stdio --data {data / 'shop-fwd'}"
        forward = StdioServerParameters(
            command=sys.executable, args=["-m", "bench._forward", "--upstream", fwd_shop], cwd=str(ROOT)
        )
        (data / "in-process").mkdir()
        store = SqliteJournalStore(data / "in-process" / "journal.db")
        async with AsyncExitStack() as stack:
            d_client, d_pids = await _open(stack, stdio_params("servers.shop", data / "shop"))
            f_client, f_pids = await _open(stack, forward)
            p_client, p_pids = await _open(stack, proxied)
            await p_client.call_tool("saga_begin", {"name": "bench"})  # every call a step of this one saga
            o_client, o_pids = await _open(stack, outside)  # no saga begun: every call a saga of its own
            journal = Journal(store, load_or_create_key(data / "in-process", ["journal"]))
            journal.register(undoable("stock", _never))
            saga = await journal.begin("bench")
            sides = {
                "direct": (_Side("direct", d_pids), _caller(d_client)),
                "forward": (_Side("forward", f_pids), _caller(f_client)),
                "proxy": (_Side("proxy", p_pids), _caller(p_client)),
                "outside": (_Side("outside", o_pids), _caller(o_client)),
                "journal": (_Side("journal", []), _step(saga)),
            }
            for _side, call in sides.values():  # warm every side
                for i in range(30):
                    await call(i)
            ratios, floors, outsides = [], [], []
            for _ in range(ROUNDS):  # interleaved rounds, so every side sees the same machine
                got = {name: await side.round(call, per_round) for name, (side, call) in sides.items()}
                ratios.append(got["proxy"] / got["direct"])
                outsides.append(got["outside"] / got["direct"])
                floors.append((got["forward"] + got["journal"]) / got["direct"])
            d_tp, p_tp = await _throughput(d_client, calls), await _throughput(p_client, calls)
        store.close()
        fsync = report.fsync_cost(data / "in-process")
    med = {name: statistics.median(side.p50s) for name, (side, _c) in sides.items()}
    what = {
        "direct": "stock() direct over stdio         ",
        "forward": "through a bare forwarding server  ",
        "proxy": "through the journaling proxy      ",
        "outside": "  the same, outside any saga      ",
        "journal": "the journal's own work, in process",
    }
    for name, (side, _c) in sides.items():
        print(f"{what[name]}  p50 {med[name] * 1000:6.2f} ms   {side.cpu_line()}")
    ratio, floor = report.Spread.of(ratios), report.Spread.of(floors)
    print(f"ratio proxy / direct (median (range) of {ROUNDS} interleaved rounds' p50s): {ratio.show(unit='x')}")
    print(
        f"floor on this machine, same rounds: (forward hop + the journal's own work) / direct = "
        f"{floor.show(unit='x')}; the journal's own work (two durable commits) is "
        f"{med['journal'] / med['direct']:.2f}x a direct call alone; fsync in the journal's directory, same run, "
        f"{fsync.show(1e3, 'ms')} (two per call)"
    )
    report.record("journal_proxy", ratio, floor, note="wall")
    print(
        f"outside any saga (a saga of its own per call, two durable commits), proxy / direct, same rounds: "
        f"{report.Spread.of(outsides).show(unit='x')} (not the goal's figure)"
    )
    d_side, p_side = sides["direct"][0], sides["proxy"][0]
    if d_side.server_cpu > 0:
        print(
            f"CPU per call, proxy side / direct side (client + servers): "
            f"{(p_side.client_cpu + p_side.server_cpu) / (d_side.client_cpu + d_side.server_cpu):.2f}x"
        )
    print(f"8 calls in flight: direct {d_tp:7.0f} calls/s, through the proxy {p_tp:7.0f} calls/s ({d_tp / p_tp:.2f}x)")


async def _never(args: dict[str, object], key: str) -> object:
    raise RuntimeError("the bench registers steps; it makes no calls through the journal")


def _caller(client: Client) -> Callable[[int], Awaitable[object]]:
    async def call(i: int) -> object:
        return await client.call_tool("stock", {"item": str(i)})

    return call


def _step(saga: Saga) -> Callable[[int], Awaitable[object]]:
    """What the proxy's journal does for one call: the step started (durable), then completed (durable)."""

    async def call(i: int) -> object:
        step = await saga.add_step("stock", {"item": str(i)})
        return await saga.complete_step(step.step_id, {"item": str(i), "inStock": 3})

    return call


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.journal_proxy")
    parser.add_argument("--calls", type=int, default=report.rounds(700, 70))
    args = parser.parse_args(argv if argv is not None else [])
    anyio.run(run, args.calls)


if __name__ == "__main__":
    raise SystemExit(report.alone("journal_proxy", lambda: main(sys.argv[1:])))

"""A tool call through the journaling proxy against the same call made directly, over stdio, in the same run.

Both sides call the shop's `stock` (a read: the shop does no write, so what is measured is the proxy's own cost:
one more stdio hop, and the journal's two durable SQLite appends per call, WAL + synchronous=FULL: the step before
the call goes upstream, its result after). Prints p50 latency per call for each side and their ratio (goal: at
most 1.3x over stdio), and calls/s with 8 calls in flight on each side.
Run: .venv/bin/python -m bench.journal_proxy [--calls N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import stdio_client

from hatp_mcp.mcp.launch import stdio_params

__all__ = ["main"]


async def p50(client: Client, calls: int) -> float:
    times = []
    for i in range(calls):
        start = time.perf_counter()
        await client.call_tool("stock", {"item": str(i)})
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def throughput(client: Client, calls: int, in_flight: int = 8) -> float:
    start = time.perf_counter()

    async def worker(n: int) -> None:
        for i in range(n):
            await client.call_tool("stock", {"item": str(i)})

    async with anyio.create_task_group() as tg:
        for _ in range(in_flight):
            tg.start_soon(worker, calls // in_flight)
    return (calls // in_flight * in_flight) / (time.perf_counter() - start)


async def run(calls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="hatp-bench-proxy-") as tmp:
        data = Path(tmp)
        (data / "undo.json").write_text(json.dumps({"tools": {}}))
        shop = f"cmd:{sys.executable} -m servers.shop --transport stdio --data {data / 'shop-up'}"
        proxied = stdio_params(
            "servers.journal_proxy", data / "proxy", ["--upstream", shop, "--undo-map", str(data / "undo.json")]
        )
        async with (
            Client(stdio_client(stdio_params("servers.shop", data / "shop"))) as direct,
            Client(stdio_client(proxied)) as proxy,
        ):
            await p50(direct, 50)  # warm both
            await p50(proxy, 50)
            d_p50, p_p50, ratios = [], [], []
            for _ in range(5):  # interleaved rounds, so both sides see the same machine
                d, p = await p50(direct, calls // 5), await p50(proxy, calls // 5)
                d_p50.append(d)
                p_p50.append(p)
                ratios.append(p / d)
            d_tp, p_tp = await throughput(direct, calls), await throughput(proxy, calls)
    d, p, r = statistics.median(d_p50), statistics.median(p_p50), statistics.median(ratios)
    print(f"stock() direct over stdio          p50 {d * 1000:7.2f} ms   {d_tp:7.0f} calls/s (8 in flight)")
    print(f"stock() through the journal proxy  p50 {p * 1000:7.2f} ms   {p_tp:7.0f} calls/s (8 in flight)")
    print(f"ratio (proxy / direct, same run)   p50 {r:.2f}x   throughput {d_tp / p_tp:.2f}x   goal <= 1.3x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.journal_proxy")
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args(argv if argv is not None else [])
    anyio.run(run, args.calls)


if __name__ == "__main__":
    main(sys.argv[1:])

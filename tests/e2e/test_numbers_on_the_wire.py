"""HATP-OBJ-4 over a real process: a raw MCP client writes `1e400` (the SDK would read infinity, then null) or
`NaN` into a plan's args on stdio; the participant refuses the prepare with the rule before anything parses it
(the wire screen, HATP-WIRE-1, holds a message to load_json's rules), and nothing is prepared."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from demo.trip_mcp import plan_for
from hatp_mcp.mcp.launch import ROOT, server_args

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


@pytest.mark.parametrize(("number", "rule"), [("1e400", "HATP-OBJ-4"), ("-1e400", "HATP-OBJ-4"), ("NaN", "HATP-OBJ-1")])
async def test_HATP_OBJ_4_overflow_in_args_over_raw_stdio_is_refused_and_nothing_is_prepared(
    tmp_path: Path, number: str, rule: str
) -> None:
    plan = plan_for("txn-nan-1", datetime.now(UTC), "2026-12-10", "14C").wire()
    pay = next(b for b in plan["branches"] if b["branchId"] == "pay")
    pay["args"]["memo"] = "__NAN__"  # replaced by the number in the raw text
    params = {"txnId": "txn-nan-1", "branchId": "pay", "planDigest": "sha256:" + "0" * 64, "plan": plan}
    params |= {"coordinator": "coordinator://acme.com/c1", "quoteOnly": False}
    cmd = [sys.executable, *server_args("servers.payments", "stdio", tmp_path / "payments", [])]
    with anyio.fail_after(60):
        async with await anyio.open_process(cmd, cwd=ROOT, stderr=subprocess.DEVNULL) as proc:
            lines = Lines(proc)
            hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
            assert "result" in await lines.call(1, "initialize", json.dumps(hello))
            await lines.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            refused = await lines.call(2, "hatp/txn/prepare", json.dumps(params).replace('"__NAN__"', number))
            status = await lines.call(3, "hatp/txn/status", json.dumps({"txnId": "txn-nan-1", "branchId": "pay"}))
            assert proc.stdin is not None
            await proc.stdin.aclose()
            await proc.wait()
    error = refused["error"]["data"]
    assert error["rule"] == rule and (rule != "HATP-OBJ-4" or f"{number} overflows a double" in error["reason"])
    assert status["result"]["state"] == "unknown"  # nothing prepared, nothing cached


class Lines:
    """JSON-RPC lines over a child's stdin/stdout, as a raw client writes them."""

    def __init__(self, proc: Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.out = BufferedByteReceiveStream(proc.stdout)

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send(line.encode() + b"\n")

    async def call(self, rid: int, method: str, params: str) -> dict[str, Any]:
        await self.send(f'{{"jsonrpc": "2.0", "id": {rid}, "method": "{method}", "params": {params}}}')
        answer: dict[str, Any] = json.loads(await self.out.receive_until(b"\n", 1 << 22))
        assert answer["id"] == rid
        return answer

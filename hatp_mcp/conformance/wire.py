"""The wire-limit checks (HATP-WIRE-1/2): malformed messages as raw lines to a fresh stdio child, or raw POSTs.

The one place the runner does not speak through the MCP SDK client: a duplicate member, a lone surrogate, params
nested past 64 levels and params that are not an object cannot be sent through it. Each must be answered at once
(bounded wait) with the JSON-RPC error HATP-WIRE-2 names, carrying the request's id (over HTTP with status
400); an unanswered message fails.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any, TextIO

import anyio
import httpx2
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from hatp_mcp.conformance.report import CheckResult, Report
from hatp_mcp.conformance.target import Target
from hatp_mcp.errors import BrokenInvariant

__all__ = ["run_wire_checks"]

_DEEP = '{"a":' * 70 + "1" + "}" * 70
# (rule, what, raw line, expected JSON-RPC code, expected data.rule)
CASES: tuple[tuple[str, str, str, int, str], ...] = (
    (
        "HATP-WIRE-1",
        "params with a duplicate member name are refused, not resolved last-wins",
        '{"jsonrpc":"2.0","id":9001,"method":"hatp/txn/status","params":'
        '{"txnId":"conf-a","txnId":"conf-b","branchId":"b1"}}',
        -32700,
        "HATP-OBJ-1",
    ),
    (
        "HATP-WIRE-1",
        "params holding a lone surrogate are refused",
        '{"jsonrpc":"2.0","id":9002,"method":"hatp/txn/status","params":{"txnId":"\\ud800","branchId":"b1"}}',
        -32700,
        "HATP-OBJ-1",
    ),
    (
        "HATP-WIRE-1",
        "params nested deeper than 64 levels are refused",
        '{"jsonrpc":"2.0","id":9003,"method":"hatp/txn/status","params":' + _DEEP + "}",
        -32600,
        "HATP-OBJ-2",
    ),
    (
        "HATP-WIRE-1",
        "params holding the non-JSON constant NaN are refused",
        '{"jsonrpc":"2.0","id":9004,"method":"hatp/txn/status","params":{"txnId":NaN,"branchId":"b1"}}',
        -32700,
        "HATP-OBJ-1",
    ),
    (
        "HATP-WIRE-1",
        "params holding a number a double cannot hold (1e400) are refused, not read as infinity",
        '{"jsonrpc":"2.0","id":9005,"method":"hatp/txn/status","params":{"txnId":"conf-a","branchId":"b1",'
        '"waitSeconds":1e400}}',
        -32600,
        "HATP-OBJ-4",
    ),
    (
        "HATP-WIRE-1",
        "a message over 8 MiB (plus 64 KiB for the envelope) is refused before it is parsed",
        '{"jsonrpc":"2.0","id":9006,"method":"hatp/txn/status","params":{"txnId":"'
        + "x" * (8 * 1024 * 1024 + 64 * 1024 + 16)
        + '","branchId":"b1"}}',
        -32600,
        "HATP-OBJ-2",
    ),
    (
        "HATP-WIRE-2",
        "params that are not an object are answered with -32602, not left unanswered",
        '{"jsonrpc":"2.0","id":9007,"method":"hatp/txn/status","params":[]}',
        -32602,
        "HATP-WIRE-1",
    ),
)


class _Lines:
    """JSON-RPC messages read from a child's stdout, one per line."""

    def __init__(self, process: Process) -> None:
        if process.stdout is None:
            raise BrokenInvariant("a server process opened without a stdout pipe")
        self.stream = TextReceiveStream(process.stdout)
        self.pending = ""

    async def message_with(self, want_id: int) -> dict[str, Any]:
        """The next message carrying `want_id` (others, e.g. notifications, are passed over)."""
        while True:
            while "\n" in self.pending:
                line, _, self.pending = self.pending.partition("\n")
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict) and message.get("id") == want_id:
                    return message
            self.pending += await self.stream.receive()


def _verdict(message: dict[str, Any], code: int, inner: str) -> tuple[str, bool]:
    error = message.get("error")
    error = error if isinstance(error, dict) else {}
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    if not error:
        return f"a result {str(message)[:200]}", False
    return f"error {error.get('code')} rule {data.get('rule')!r}", error.get("code") == code and data.get(
        "rule"
    ) == inner


def _result(rule: str, what: str, raw: str, code: int, inner: str, want_id: int, got: str, passed: bool) -> CheckResult:
    shown = raw[:100] + ("..." if len(raw) > 100 else "")
    return CheckResult(
        rule,
        what,
        f"raw bytes: {shown}",
        f"error {code} with data.rule {inner}, id {want_id}",
        got,
        "pass" if passed else "fail",
    )


async def run_wire_checks(target: Target, report: Report, errlog: TextIO, answer_seconds: float = 10.0) -> None:
    """Send each malformed message to the target (raw stdio lines to a fresh child, or raw HTTP POSTs to the
    URL); add one result per case."""
    if target.url is not None:
        await _over_http(target.url, report, answer_seconds)
    else:
        await _over_stdio(target, report, errlog, answer_seconds)


async def _over_http(url: str, report: Report, answer_seconds: float) -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=answer_seconds) as http:
        for want_id, (rule, what, raw, code, inner) in enumerate(CASES, start=9001):
            try:
                answer = await http.post(url, content=raw.encode(), headers=headers)
            except httpx2.HTTPError as exc:
                report.add(_result(rule, what, raw, code, inner, want_id, f"no answer ({exc!r})", False))
                continue
            try:
                message = answer.json()
            except ValueError:
                message = None
            if not isinstance(message, dict):
                got, passed = f"HTTP {answer.status_code} without a JSON-RPC error: {answer.text[:120]!r}", False
            else:
                got, passed = _verdict(message, code, inner)
                id_ok = message.get("id") == want_id
                got += f", HTTP {answer.status_code}, id {message.get('id')!r}"
                passed = passed and answer.status_code == 400 and id_ok
            report.add(_result(rule, what, raw, code, inner, want_id, got, passed))


async def _over_stdio(target: Target, report: Report, errlog: TextIO, answer_seconds: float) -> None:
    params = target.stdio_parameters()
    process = await anyio.open_process(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        cwd=params.cwd,
        env=params.env,
    )
    try:
        if process.stdin is None:
            raise BrokenInvariant("a server process opened without a stdin pipe")
        lines = _Lines(process)
        for want_id, (rule, what, raw, code, inner) in enumerate(CASES, start=9001):
            closed = False
            try:
                with anyio.fail_after(answer_seconds):
                    await process.stdin.send((raw + "\n").encode())
                    message = await lines.message_with(want_id)
                got, passed = _verdict(message, code, inner)
            except TimeoutError:
                got, passed = f"no answer within {answer_seconds:g} s", False
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                got, passed, closed = f"the server closed the pipe ({exc!r})", False, True
            report.add(_result(rule, what, raw, code, inner, want_id, got, passed))
            if closed:
                break
    finally:
        if process.stdin is not None:
            await process.stdin.aclose()
        with anyio.move_on_after(5):
            await process.wait()
        if process.returncode is None:
            process.kill()
            with anyio.move_on_after(5):
                await process.wait()

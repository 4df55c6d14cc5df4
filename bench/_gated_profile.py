"""(A tool, not a benchmark: `make bench` skips it, as it skips every bench module whose name starts with `_`.)

The whole gated server process, deterministic, for callgrind: what a gated tool call costs the server in
instructions, the MCP SDK's request path included (bench/gated.py times it instead).

`lines N KIND FILE` writes a server/discover request and N tools/call requests for demo.gated_server's
`charge_card`, as the SDK's Client sends them (protocol 2026-07-28: its keys in each request's `_meta`), each for
its own card; KIND `gated` and `carry` put a fresh approval in `_meta` (the gateway's and the people's fixture keys,
counter nonces, the fixed clock: the same bytes on every run), `plain` none. `drive FILE CMD...` starts CMD in the
current directory (the server, under valgrind say; another worktree's for an A/B), sends it FILE one request at a
time, waiting for each answer, and fails on any error. The instructions per call are the difference of two runs, N
and M calls, over N - M (the first calls warm it):

    .venv/bin/python -m bench._gated_profile lines 110 gated g110.jsonl   # and 10 -> g10.jsonl
    PYTHONHASHSEED=0 .venv/bin/python -m bench._gated_profile drive g110.jsonl valgrind --tool=callgrind \\
        --callgrind-out-file=g110.cg .venv/bin/python -m demo.gated_server --org spec/fixtures/org \\
        --now 2026-11-29T10:00:00Z --db g110.db                            # add --ungated for carry, plain

docs/performance.md quotes the counts it gave last.
"""

from __future__ import annotations

import importlib
import itertools
import json
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError

from demo.gated_server import build
from hatp_mcp.core.gated_tools.checks import APPROVAL_META_KEY
from hatp_mcp.runtime.clock import FakeClock

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _counter_nonces() -> None:
    """Every nonce the fixtures draw (secrets.token_hex, token_urlsafe) from a counter: the same bytes each run."""
    count = itertools.count()

    def token_hex(nbytes: int | None = 16) -> str:
        return f"{next(count):0{2 * (nbytes or 16)}x}"

    def token_urlsafe(nbytes: int | None = 18) -> str:
        return f"n{next(count):0{nbytes or 18}d}"

    secrets.token_hex = token_hex
    secrets.token_urlsafe = token_urlsafe


async def _tool_call(clock: FakeClock) -> dict[str, Any]:
    """The ToolCall the gate names when refusing an unapproved call (what the gateway approves)."""
    server = build(":memory:", ROOT / "spec" / "fixtures" / "org", clock)
    args: dict[str, Any] = importlib.import_module("tests.mcp.test_gated_tools").ARGS
    async with Client(server) as client:
        try:
            await client.call_tool("charge_card", args)
        except MCPError as exc:
            found: dict[str, Any] = (exc.data or {})["data"]["toolCall"]
            return found
    raise SystemExit("the gated server ran an unapproved call")


def lines(n: int, kind: str, out: Path) -> None:
    _counter_nonces()
    gate_tests: Any = importlib.import_module("tests.mcp.test_gated_tools")  # the gateway's side, as bench.gated
    clock = FakeClock()
    tool_call = anyio.run(_tool_call, clock)
    requests: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": PROTOCOL_META}}
    ]
    for i in range(n):
        args = {**gate_tests.ARGS, "card": f"tok_visa_{i:04d}"}
        meta = dict(PROTOCOL_META)
        if kind in ("gated", "carry"):
            meta[APPROVAL_META_KEY] = gate_tests.approve(tool_call, clock.now(), args=args)
        params = {"name": "charge_card", "arguments": args, "_meta": meta}
        requests.append({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params})
    out.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in requests))


def drive(path: Path, command: list[str]) -> int:
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # in this directory
    assert server.stdin is not None and server.stdout is not None
    answered = 0
    for line in path.read_bytes().splitlines(keepends=True):
        server.stdin.write(line)
        server.stdin.flush()
        answer = json.loads(server.stdout.readline())
        if "error" in answer or answer.get("result", {}).get("isError"):
            raise SystemExit(f"request {answer.get('id')} failed: {str(answer)[:300]}")
        answered += 1
    server.stdin.close()
    server.wait()
    print(f"{answered} requests answered", file=sys.stderr)
    return server.returncode


def main() -> int:
    match sys.argv[1:]:
        case ["lines", n, ("gated" | "carry" | "plain") as kind, out]:
            lines(int(n), kind, Path(out))
            return 0
        case ["drive", path, *command] if command:
            return drive(Path(path), command)
    raise SystemExit(__doc__)


if __name__ == "__main__":
    raise SystemExit(main())

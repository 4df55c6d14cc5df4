"""TEST-ONLY: the project's Human Gateway with its coordinator check switched off (every ask, abort and tighten
admitted unproven), served over stdio, for `hatp conformance gateway` to name by rule id (HATP-TRUST-1..4, 8).

`python -m tests.conformance.broken_gateway --data DIR --trusted-coordinators FILE`
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path

import anyio
from mcp.server import MCPServer

from hatp_mcp.mcp.approver_server import serve_approver
from hatp_mcp.mcp.serve import quiet, serve
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.gateway import GatewayApprover
from servers.gateway import DEFAULT_ORG, build
from tests.conformance.broken_participant import AdmitAnyone


async def _run(server: MCPServer, gateway: GatewayApprover) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(gateway.run)
        await serve(server, "stdio")
        tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="broken_gateway")
    parser.add_argument("--data", required=True)
    parser.add_argument("--trusted-coordinators", required=True)
    args = parser.parse_args(argv)
    quiet()
    clock = SystemClock()
    _server, gateway, deliverer = build(Path(args.data), DEFAULT_ORG, clock, None, args.trusted_coordinators)
    server = MCPServer("hatp-broken-gateway", version="0.0.1", log_level="WARNING")
    serve_approver(server, gateway, trust=AdmitAnyone(None, clock))
    try:
        anyio.run(functools.partial(_run, server, gateway))
    finally:
        gateway.store.close()
        deliverer.outbox.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

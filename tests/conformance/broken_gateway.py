"""TEST-ONLY: the project's Human Gateway with one rule broken on purpose, served over stdio, for `hatp conformance
gateway` to name by rule id.

`python -m tests.conformance.broken_gateway --data DIR --trusted-coordinators FILE [--break MODE]`. Modes:
- `trust-anyone` (the default): the coordinator check switched off, every ask, abort and tighten admitted
  unproven (breaks HATP-TRUST-1..4, 8);
- `estimate-unsigned`: estimates go out without the gateway's signature (breaks HATP-MCP-17);
- `tighten-ignored`: a tighten changes nothing and answers the ask's old vote (breaks HATP-MCP-18).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer

from hatp_mcp.mcp.gateway_server import serve_gateway
from hatp_mcp.mcp.serve import quiet, serve
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator_trust import open_trust
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from servers.gateway import DEFAULT_ORG, build
from tests.conformance.broken_participant import AdmitAnyone

MODES = ("trust-anyone", "estimate-unsigned", "tighten-ignored")


def _break(gateway: GatewayApprover, mode: str) -> None:
    """Replace one of the gateway's own methods on this instance with its broken form."""
    if mode == "estimate-unsigned":
        estimate = gateway.estimate

        async def unsigned(*args: Any, **kwargs: Any) -> Any:
            return (await estimate(*args, **kwargs)).model_copy(update={"signature": None})

        gateway.estimate = unsigned  # type: ignore[method-assign]
    elif mode == "tighten-ignored":

        async def ignored(*args: Any, **kwargs: Any) -> None:
            return None

        gateway.tighten = ignored  # type: ignore[method-assign]


async def _run(server: MCPServer, gateway: GatewayApprover) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(gateway.run)
        await serve(server, "stdio")
        tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="broken_gateway")
    parser.add_argument("--data", required=True)
    parser.add_argument("--trusted-coordinators", required=True)
    parser.add_argument("--break", dest="mode", choices=MODES, default="trust-anyone")
    args = parser.parse_args(argv)
    quiet()
    clock = SystemClock()
    _server, gateway, deliverer = build(Path(args.data), DEFAULT_ORG, clock, None, args.trusted_coordinators)
    server = MCPServer("hatp-broken-gateway", version="0.0.1", log_level="WARNING")
    _break(gateway, args.mode)
    trust = (
        AdmitAnyone(None, clock)
        if args.mode == "trust-anyone"
        else open_trust(Path(args.data), args.trusted_coordinators, clock)
    )
    serve_gateway(server, gateway, trust=trust)
    try:
        anyio.run(functools.partial(_run, server, gateway))
    finally:
        gateway.store.close()
        deliverer.outbox.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The proxy's gate options (spec/proxy.md HATP-PXY-20..24): `--org DIR` (the organisation whose gateway keys,
people's and agents' cards approvals are checked against), `--server-id ID` (the proxy's id in the approvals it
accepts), `--gateway URL|stdio:MODULE[:DATA]` with `--agent-key FILE` (the proxy asks the Human Gateway itself, as
the agent whose Directory-signed card lists that key), `--approval-wait S`, `--approval-poll S`, and `--now TS`
(tests: a fake clock pinned there)."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.proxy_policy import ProxyPolicy
from hatp_mcp.mcp.proxy_gate import GateSetup, ProxyGate, budgets_unconfigured, build_gate
from hatp_mcp.mcp.server_links import Target, open_links
from hatp_mcp.runtime.clock import Clock, FakeClock, SystemClock

__all__ = ["add_gate_arguments", "open_gate"]

_GATEWAY = "hatp.gateway"


def add_gate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--org", help="the organisation dir: approvals of gated tools are checked against its cards")
    p.add_argument("--server-id", help="this proxy's id in the approvals it accepts (default mcp-proxy://DATA name)")
    p.add_argument("--gateway", help="the Human Gateway the proxy asks for approvals: http://... or stdio:MODULE")
    p.add_argument(
        "--agent-key", help="the private JWK of the agent the proxy acts as (it asks as it; budgets count for it)"
    )
    p.add_argument("--approval-wait", type=float, default=900.0, help="seconds to wait for the people (max)")
    p.add_argument("--approval-poll", type=float, default=2.0, help="seconds between looks at a pending approval")
    p.add_argument("--now", help="tests: pin the gate's clock at this RFC 3339 UTC time")


@asynccontextmanager
async def open_gate(args: argparse.Namespace, data: Path, policy: ProxyPolicy) -> AsyncIterator[ProxyGate | None]:
    """The gate, or None when the proxy has no --org (a gated tool then refuses to start, HATP-PXY-20). Raises
    HatpError HATP-PXY-23 (budgets without --org), ValueError, OSError."""
    if args.org is None:
        if args.gateway or args.agent_key:
            raise ValueError("--gateway and --agent-key need --org (the cards approvals are checked against)")
        if policy.budgets:
            raise budgets_unconfigured(org=False)
        yield None
        return
    clock, setup = _setup(args, data)
    targets = {_GATEWAY: Target.parse(args.gateway)} if args.gateway else {}
    async with open_links(targets, data) as links:
        gate = build_gate(setup, data, policy.budgets, clock, links.get(_GATEWAY))
        try:
            yield gate
        finally:
            gate.ledger.close()
            if gate.shadow_ledger is not None:
                gate.shadow_ledger.close()


def _setup(args: argparse.Namespace, data: Path) -> tuple[Clock, GateSetup]:
    """The gate's clock and setup from the command line. Raises ValueError."""
    if args.approval_wait <= 0 or args.approval_poll <= 0:
        raise ValueError("--approval-wait and --approval-poll are positive seconds")
    clock: Clock = FakeClock(parse_ts(args.now)) if args.now else SystemClock()
    setup = GateSetup(
        org=Path(args.org).resolve(),
        server_id=args.server_id or f"mcp-proxy://{data.resolve().name}",
        gateway=args.gateway,
        agent_key=Path(args.agent_key) if args.agent_key else None,
        wait=timedelta(seconds=args.approval_wait),
        poll=timedelta(seconds=args.approval_poll),
    )
    return clock, setup

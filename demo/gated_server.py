"""The payments server of `make demo-gated`: an ordinary MCPServer with a `charge_card` tool, gated by
`gate_tools`, and an ungated `charges` tool that reports what was charged (the side effect, counted).

`python -m demo.gated_server --db GATE.db --org ORG_DIR [--now 2026-11-29T10:00:00Z]` serves stdio. It trusts
the gateway keys the organisation publishes in ORG_DIR/.well-known/human-card.json, the people's cards and the
agents' cards (whom each agent acts for) in ORG_DIR. `--now` pins a fake clock
(tests); without it the real clock runs. Never prints to stdout: that is the MCP wire.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import anyio
from mcp.server import MCPServer

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.mcp.gated_tools import ApprovalGate, create_approval_gate, gate_tools
from hatp_mcp.mcp.serve import serve
from hatp_mcp.runtime.clock import Clock, FakeClock, SystemClock
from hatp_mcp.runtime.org import load_agents, load_directory

__all__ = ["REQUIRES", "SERVER_ID", "approval_gate", "build", "main"]

SERVER_ID = "mcp://payments.example"
REQUIRES = {
    "address": "human://acme.com/role/finance-approver?quorum=2-of-3",
    "requirement": {"action": "travel.spend", "amountFrom": "/amount", "payeeFrom": "/payee"},
}


def build(db: str | Path, org: str | Path, clock: Clock, *, gated: bool = True, verify_threads: int = 1) -> MCPServer:
    server = MCPServer("payments", log_level="WARNING")
    charges: list[str] = []

    def charge_card(card: str, amount: dict[str, str], payee: str) -> str:
        """Charge a card. Moves money: needs a finance approval."""
        line = f"charged {amount['value']} {amount['currency']} on {card} to {payee}"
        charges.append(line)
        return line

    def list_charges() -> str:
        """What this server has charged so far."""
        return json.dumps(charges)

    server.add_tool(charge_card)
    server.add_tool(list_charges, name="charges")
    gate = approval_gate(db, org, clock, verify_threads)
    if gated:  # `--ungated` (bench/gated.py's baseline): the same server and tool with no gate in front
        gate_tools(server, gate, tools={"charge_card": {"requires": REQUIRES}})
    return server


def approval_gate(db: str | Path, org: str | Path, clock: Clock, verify_threads: int = 1) -> ApprovalGate:
    """The gate this server puts in front of charge_card: the organisation's gateway keys, people and agents;
    an approval's signatures verified on `verify_threads` threads (1 or 2)."""
    well_known = json.loads((Path(org) / ".well-known" / "human-card.json").read_text())
    gateways = {"keys": [k for k in well_known["keys"] if "gateway" in k.get("roles", [])]}
    directory, _ignored = load_directory(org)  # the people's decision keys, from Directory-signed cards only
    agents, _ignored_agents = load_agents(org)  # whom each agent acts for, from Directory-signed agent cards only
    return create_approval_gate(
        SERVER_ID,
        gateways,
        humans=directory.cards(),
        agents=agents,
        replay_cache=str(db),
        clock=clock,
        verify_threads=verify_threads,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--db", required=True, help="SQLite file of used approvals (kept across restarts)")
    ap.add_argument("--org", required=True, help="organisation dir with .well-known/human-card.json")
    ap.add_argument("--now", help="pin a fake clock at this RFC 3339 UTC time (tests)")
    ap.add_argument("--ungated", action="store_true", help="serve charge_card without its gate (a bench baseline)")
    ap.add_argument(
        "--verify-threads",
        type=int,
        choices=(1, 2),
        default=1,
        help="threads an approval's signatures are verified on (2: the checking thread and a verifier; a bench's A/B)",
    )
    args = ap.parse_args(argv)
    clock: Clock = FakeClock(parse_ts(args.now)) if args.now else SystemClock()
    server = build(args.db, args.org, clock, gated=not args.ungated, verify_threads=args.verify_threads)
    anyio.run(serve, server, "stdio")  # the project's stdio: the wire's limits, no thread hop per line
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

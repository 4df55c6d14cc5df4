"""`hatp mcp-config [--data DIR] [--python PATH]`: print the Claude Desktop `mcpServers` JSON for the suite.

Every path is absolute (Claude Desktop starts servers from an unknown directory): the Python interpreter, the
repository root as the working directory, and each server's --data directory. The coordinator reaches the four
tool servers and the gateway as its own stdio children on the same --data directories (their SQLite state is
shared with the entries Claude Desktop starts, so a person deciding through the gateway's tools is seen by the
coordinator's gateway on its next poll), trusts the gateway key of the organisation's well-known document, and
pins each tool server's key to the public key that server writes under its --data (HATP-MCP-27), and holds the
agent's key to sign each plan's requester for Claude Desktop, which cannot sign (HATP-TXN-21).

It also sets up the other direction (spec/mcp-binding.md HATP-TRUST-10): the coordinator's key is made under
`DATA/coordinator` if it is not there yet (the coordinator signs with it on every start), and every tool server's
and the gateway's `DATA/<name>/trusted-coordinators.json` names it, so they act for that coordinator and no one
else. What it wrote is said on stderr; stdout is the JSON alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, fail, print_json
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE, trust_coordinator

__all__ = ["HELP", "SERVERS", "add_arguments", "config", "coordinator_args", "run", "trust_setup"]

HELP = "print the Claude Desktop mcpServers JSON for the HATP server suite (absolute paths)"
SERVERS = ("coordinator", "gateway", "directory", "airline", "hotel", "calendar", "payments")
ROOT = Path(__file__).resolve().parents[2]
TOOL_SERVERS = ("airline", "hotel", "calendar", "payments")
WELL_KNOWN = ROOT / "spec" / "fixtures" / "org" / ".well-known" / "human-card.json"  # TEST-ONLY acme.com
GATEWAY_ID = "https://acme.com/hatp/gateway"
AGENT_KEY = WELL_KNOWN.parent.parent / "test-only-keys" / "agents" / "travel-bot.private.jwk.json"
COORDINATOR_ID = "coordinator://localhost"
RECEIVERS = (*TOOL_SERVERS, "gateway")  # they act only for the coordinator (HATP-TRUST-10)


def trust_setup(data: Path, names: tuple[str, ...]) -> list[Path]:
    """HATP-TRUST-10: the coordinator's key (kept if present) trusted by each receiver among `names`. Returns the
    trust lists written. Raises OSError or ValueError."""
    receivers = [data / n for n in names if n in RECEIVERS]
    if not receivers:
        return []
    trust_coordinator(data / "coordinator", COORDINATOR_ID, receivers)
    return [r / TRUST_FILE for r in receivers]


def coordinator_args(data: Path) -> list[str]:
    """How the coordinator reaches the suite: each tool server and the gateway as a stdio child on its --data."""
    args = [f"--participant=mcp://{n}.example/hatp=stdio:servers.{n}:{(data / n).absolute()}" for n in TOOL_SERVERS]
    # each server's own public key, written under its --data on its first start, is the one its evidence must carry
    args += [
        f"--participant-keys=mcp://{n}.example/hatp={(data / n / 'public.jwk.json').absolute()}" for n in TOOL_SERVERS
    ]
    gateway = f"stdio:servers.gateway:{(data / 'gateway').absolute()}"
    org = ["--org", str(WELL_KNOWN.parent.parent)]  # each person's signed decision is checked against the cards
    # Claude Desktop cannot sign: the coordinator it starts holds the agent's (TEST-ONLY) key and signs each plan
    # as the agent its Directory-signed card names, for the person the card names (HATP-TXN-21)
    agent = ["--agent-key", str(AGENT_KEY)]
    gw = ["--gateway", gateway, "--gateway-keys", str(WELL_KNOWN), "--gateway-id", GATEWAY_ID]
    return [*args, *gw, *org, *agent, "--id", COORDINATOR_ID]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default=str(Path.home() / ".hatp"), help="parent of each server's data directory")
    p.add_argument("--python", default=sys.executable, help="the interpreter that has hatp-mcp installed")
    p.add_argument("--only", action="append", choices=SERVERS, help="include only these servers (repeatable)")


def config(data: Path, python: str, names: tuple[str, ...] = SERVERS) -> dict[str, Any]:
    servers: dict[str, Any] = {}
    for name in names:
        servers[f"hatp-{name}"] = {
            "command": str(Path(python).absolute()),
            "args": ["-m", f"servers.{name}", "--transport", "stdio", "--data", str((data / name).absolute())]
            + (coordinator_args(data) if name == "coordinator" else []),
            "cwd": str(ROOT),
            "env": {"PYTHONPATH": str(ROOT)},
        }
    return {"mcpServers": servers}


def run(args: argparse.Namespace) -> int:
    # by default only the servers this checkout has (the coordinator, gateway and directory land separately)
    names = tuple(args.only) if args.only else tuple(n for n in SERVERS if (ROOT / "servers" / f"{n}.py").exists())
    data = Path(args.data).expanduser()
    try:
        written = trust_setup(data.absolute(), names)
    except (OSError, ValueError) as exc:
        return fail(f"cannot set up the coordinator's trust under {data}: {exc}", EXIT_BAD_INPUT)
    for path in written:
        print(f"trusts {COORDINATOR_ID}: {path}", file=sys.stderr)
    print_json(config(data, args.python, names))
    return EXIT_OK

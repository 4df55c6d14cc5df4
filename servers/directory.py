"""The Directory as an MCP server process.

`python -m servers.directory --transport stdio|http [--port N] [--data DIR] [--org DIR] [--now TS]`

Loads the organisation (default spec/fixtures/org, the TEST-ONLY acme.com): its well-known document and the
Directory's signed cards; a card that does not verify is ignored (logged with its rule) and never served. Serves
`hatp/directory/resolve` and the cards and well-known document as resources (hatp_mcp/mcp/directory_server.py).
It signs nothing (cards are signed when issued) and keeps no state, so `--data` is accepted for a uniform command
line and left unused. It never reads `contacts.json`: contact details are the gateway's. `--now` pins the clock
resolve uses when a request names no instant (tests). Never writes to stdout (the stdio wire).
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer

from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.directory_server import serve_directory
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.serve import add_server_arguments, log, quiet, serve
from hatp_mcp.runtime.clock import Clock, FakeClock, SystemClock

__all__ = ["DEFAULT_ORG", "build", "main"]

DEFAULT_ORG = Path(__file__).resolve().parents[1] / "spec" / "fixtures" / "org"


def build(org: Path, clock: Clock) -> MCPServer:
    """Raises OSError or ValueError (unreadable files) or HatpError HATP-CARD-3 (an unusable well-known)."""
    well_known: dict[str, Any] = json.loads((org / ".well-known" / "human-card.json").read_text())
    docs = [json.loads(p.read_text()) for p in sorted((org / "cards").glob("*.json"))]
    directory, ignored = Directory.load(well_known, docs)
    if any("test-only" in e.kid for e in directory.keyring.entries()):
        log(f"directory: organisation {directory.well_known.organization} is TEST-ONLY (its keys are published)")
    for card in ignored:
        log(f"directory: ignored card {card.card_id}: {card.rule} {card.reason}")
    skipped = {c.index for c in ignored}
    signed = {str(d["id"]): d for i, d in enumerate(docs) if i not in skipped}
    server = HatpServer("hatp-directory", version="0.1.0", log_level="WARNING")
    serve_directory(server, directory, signed, well_known, clock)
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servers.directory", description="the Directory MCP server (HATP)")
    add_server_arguments(parser)
    parser.add_argument("--org", default=str(DEFAULT_ORG), help="organisation dir (.well-known, cards)")
    parser.add_argument("--now", default=None, help="pin a fake clock at this RFC 3339 UTC time (tests)")
    args = parser.parse_args(argv)
    quiet()
    try:
        clock: Clock = FakeClock(parse_ts(args.now)) if args.now else SystemClock()
        server = build(Path(args.org).resolve(), clock)
    except (OSError, ValueError, HatpError) as exc:
        log(f"directory: cannot start: {exc}")
        return 2
    anyio.run(functools.partial(serve, server, args.transport, args.port, parent_watch=args.parent_watch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

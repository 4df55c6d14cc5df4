"""The Directory as an MCP server process.

`python -m servers.directory --transport stdio|http [--port N] [--data DIR] [--org DIR] [--now TS]`

Loads the organisation (default spec/fixtures/org, the TEST-ONLY acme.com): its well-known document and the
Directory's signed cards; a card that does not verify is ignored (logged with its rule) and never served. Serves
`hatp/directory/resolve` and the cards and well-known document as resources (hatp_mcp/mcp/directory_server.py).
It signs nothing (cards are signed when issued) and keeps no state, so `--data` is accepted for a uniform command
line and left unused. A person's open asks are live (HATP-GW-9, HATP-GW-95): resolve counts the asks pending for
them in the gateway's store (`--gateway-data DIR`, default the organisation's own `data/gateway`, once the
gateway has made it) with the same function the gateway routes with, on top of their card's `capacity.open`;
without a gateway store, the card's number alone. It never reads `contacts.json`: contact details are the
gateway's. `--now` pins the clock resolve uses when a request names no instant (tests). Never writes to stdout (the
stdio wire).
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer

from hatp_mcp.cli.org_layout import OrgLayout
from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.gateway.waiting import open_asks_of
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.directory_server import serve_directory
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.serve import add_server_arguments, log, quiet, serve
from hatp_mcp.runtime.clock import Clock, FakeClock, SystemClock
from hatp_mcp.store.gateway_store import DB_NAME, GatewayStore, SqliteGatewayStore

__all__ = ["DEFAULT_ORG", "build", "main"]

DEFAULT_ORG = Path(__file__).resolve().parents[1] / "spec" / "fixtures" / "org"


def _live(data: Path) -> Callable[[], dict[str, int]]:
    """The open asks by person in the gateway's store at `data`, read at each call; the store is opened at the
    first call that finds it (the gateway may create it after the Directory starts), none before."""
    opened: list[GatewayStore] = []

    def count() -> dict[str, int]:
        if not opened:
            if not (data / DB_NAME).exists():
                return {}
            opened.append(SqliteGatewayStore(data))
        return open_asks_of(stored.record for stored in opened[0].asks("pending"))

    return count


def build(org: Path, clock: Clock, gateway_data: Path | None = None) -> MCPServer:
    """`gateway_data`: the gateway's data dir whose pending asks count toward each person's capacity (default:
    the organisation's `data/gateway` when it holds a store). Raises OSError or ValueError (unreadable files) or
    HatpError HATP-CARD-3 (an unusable well-known)."""
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
    if gateway_data is not None and not gateway_data.is_dir():
        raise ValueError(f"--gateway-data {gateway_data}: not a directory (the gateway's data dir)")
    serve_directory(server, directory, signed, well_known, clock, _live(gateway_data or OrgLayout(org).data("gateway")))
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servers.directory", description="the Directory MCP server (HATP)")
    add_server_arguments(parser)
    parser.add_argument("--org", default=str(DEFAULT_ORG), help="organisation dir (.well-known, cards)")
    parser.add_argument("--now", default=None, help="pin a fake clock at this RFC 3339 UTC time (tests)")
    parser.add_argument(
        "--gateway-data",
        default=None,
        help="the gateway's data dir: its pending asks count toward each person's capacity (default: ORG/data/gateway)",
    )
    args = parser.parse_args(argv)
    quiet()
    try:
        clock: Clock = FakeClock(parse_ts(args.now)) if args.now else SystemClock()
        gateway_data = Path(args.gateway_data).resolve() if args.gateway_data else None
        server = build(Path(args.org).resolve(), clock, gateway_data)
    except (OSError, ValueError, HatpError) as exc:
        log(f"directory: cannot start: {exc}")
        return 2
    anyio.run(functools.partial(serve, server, args.transport, args.port, parent_watch=args.parent_watch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

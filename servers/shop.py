"""A small shop as an MCP server: returns, refunds and shipping labels, for the journal's demo and tests.

`python -m servers.shop --transport stdio|http [--port N] --data DIR [--label-fails] [--undo-fails N]
[--gate-undo ORG]`

Tools: `mark_returned(item)`, `unmark_returned(item)`, `refund(item, usd)`, `reverse_refund(item)`,
`create_label(item)` (fails with `--label-fails`: the carrier is down), `stock(item)` (a read), `effects()` (what
happened, in order).
Every effect is idempotent on the idempotency key a caller sends in the request's `_meta`
(`io.hatp/idempotencyKey`): a second call with a key already seen changes nothing and answers as the first did.
`--undo-fails N`: the first N `reverse_refund` calls fail (a payments API that is down for a while).
`--gate-undo ORG`: `reverse_refund` is approval-gated (`gate_tools`: two of ORG's finance approvers, proven by
their Directory-signed cards, through the gateway ORG publishes), as the journal's gated-undo tests need. State lives
in SQLite under --data, so a restarted shop remembers what it did. Never writes to stdout (the stdio wire).
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
from mcp.server.mcpserver import Context

from hatp_mcp.mcp.gated_tools import create_approval_gate, gate_tools
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.serve import add_server_arguments, log, quiet, serve
from hatp_mcp.runtime.org import load_agents, load_directory
from hatp_mcp.store.sqlite import open_db

__all__ = ["KEY_META", "SERVER_ID", "UNDO_REQUIRES", "build", "main"]

KEY_META = "io.hatp/idempotencyKey"


class Shop:
    def __init__(self, data: Path, *, label_fails: bool, undo_fails: int) -> None:
        data.mkdir(parents=True, exist_ok=True)
        self.db = open_db(data / "shop.db")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS effect (n INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,"
            " item TEXT NOT NULL, key TEXT, answer TEXT NOT NULL)"
        )
        self.label_fails = label_fails
        self.undo_fails = undo_fails

    def effect(self, kind: str, item: str, key: str | None, answer: dict[str, Any]) -> dict[str, Any]:
        """Record the effect once per key: a repeat answers as the first time and changes nothing."""
        if key is not None:
            row = self.db.execute("SELECT answer FROM effect WHERE kind = ? AND key = ?", (kind, key)).fetchone()
            if row is not None:
                return {**json.loads(row[0]), "repeat": True}
        self.db.execute(
            "INSERT INTO effect (kind, item, key, answer) VALUES (?, ?, ?, ?)", (kind, item, key, json.dumps(answer))
        )
        return answer

    def effects(self) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT kind, item, key FROM effect ORDER BY n").fetchall()
        return [{"kind": k, "item": i, "key": key} for k, i, key in rows]


def _key(ctx: Context) -> str | None:
    meta = ctx.request_context.meta or {}
    value = meta.get(KEY_META)
    return value if isinstance(value, str) else None


SERVER_ID = "mcp://shop.example"  # the shop's id in the approvals of its gated tools
UNDO_REQUIRES = {  # who must approve a reversed refund, with --gate-undo
    "address": "human://acme.com/role/finance-approver?quorum=2-of-3",
    "requirement": {"action": "travel.spend"},
}


def build(data: Path, *, label_fails: bool = False, undo_fails: int = 0, gate_org: Path | None = None) -> MCPServer:
    shop = Shop(data, label_fails=label_fails, undo_fails=undo_fails)
    server = HatpServer("hatp-demo-shop", version="0.1.0", log_level="WARNING")

    async def mark_returned(item: str, ctx: Context) -> dict[str, Any]:
        """Mark an order's item as returned by the customer."""
        return shop.effect("mark", item, _key(ctx), {"item": item, "status": "returned"})

    async def unmark_returned(item: str, ctx: Context) -> dict[str, Any]:
        """Undo mark_returned: the item is back to sold."""
        return shop.effect("unmark", item, _key(ctx), {"item": item, "status": "sold"})

    async def refund(item: str, usd: str, ctx: Context) -> dict[str, Any]:
        """Refund the customer for an item (usd as a decimal string, "40.00")."""
        return shop.effect("refund", item, _key(ctx), {"item": item, "refunded": usd})

    async def reverse_refund(item: str, ctx: Context) -> dict[str, Any]:
        """Undo refund: the refund for that item is reversed."""
        if shop.undo_fails > 0:
            shop.undo_fails -= 1
            raise RuntimeError("payments API unavailable")
        return shop.effect("unrefund", item, _key(ctx), {"item": item, "reversed": True})

    async def create_label(item: str, ctx: Context) -> dict[str, Any]:
        """Print a return shipping label."""
        if shop.label_fails:
            raise RuntimeError("the carrier's label service is down")
        return shop.effect("label", item, _key(ctx), {"item": item, "label": f"LBL-{item}"})

    async def stock(item: str) -> dict[str, Any]:
        """How many of an item are in stock (a read: no effect)."""
        return {"item": item, "inStock": 3}

    async def effects() -> dict[str, Any]:
        """Every effect this shop made, in order (for the demo and tests)."""
        return {"effects": shop.effects()}

    for fn in (mark_returned, unmark_returned, refund, reverse_refund, create_label, stock, effects):
        server.add_tool(fn, name=fn.__name__, description=fn.__doc__)
    if gate_org is not None:
        well_known = json.loads((gate_org / ".well-known" / "human-card.json").read_text())
        gateways = {"keys": [k for k in well_known["keys"] if "gateway" in k.get("roles", [])]}
        directory, _ignored = load_directory(gate_org)
        agents, _ignored_agents = load_agents(gate_org)
        cache = str(data / "gate.db")
        gate = create_approval_gate(SERVER_ID, gateways, humans=directory.cards(), agents=agents, replay_cache=cache)
        gate_tools(server, gate, tools={"reverse_refund": {"requires": UNDO_REQUIRES}})
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servers.shop", description="a demo shop MCP server (returns, refunds)")
    add_server_arguments(parser)
    parser.add_argument("--label-fails", action="store_true", help="create_label fails (the carrier is down)")
    parser.add_argument("--undo-fails", type=int, default=0, help="the first N reverse_refund calls fail")
    parser.add_argument("--gate-undo", metavar="ORG", help="reverse_refund needs a finance approval (ORG's people)")
    args = parser.parse_args(argv)
    quiet()
    if args.data is None:
        log("shop: --data DIR is required (the shop keeps its state there)")
        return 2
    gate_org = Path(args.gate_undo) if args.gate_undo else None
    server = build(Path(args.data), label_fails=args.label_fails, undo_fails=args.undo_fails, gate_org=gate_org)
    anyio.run(functools.partial(serve, server, args.transport, args.port, parent_watch=args.parent_watch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

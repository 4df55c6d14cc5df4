"""A minimal process around GatewayApprover: JSON lines on stdin, one JSON answer line per request on stdout.

`python -m hatp_mcp.runtime.gateway_stdio --data DIR --org ORG_DIR --key GATEWAY_KEY.json`

Requests: ``{"op": "ask", "plan": {...}, "requirementId": "r"}``, ``{"op": "poll", "txnId": "t",
"requirementId": "r"}``, ``{"op": "withdraw", ...}``, ``{"op": "decide", "askId", "human", "action", "value"?}``.
Answers: ``{"ok": true, "vote": ..., "approval": ...}`` or ``{"ok": false, "error": {rule, reason, ...}}``.
It exists so tests can kill and restart a real gateway process; the MCP server (issue #6) replaces it. It must
not hold protocol logic: everything is GatewayApprover's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from hatp_mcp.core.keys import SigningKey
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.wire import parse
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.gateway import GatewayApprover, load_org
from hatp_mcp.store.gateway_store import GatewayStore

__all__ = ["handle", "main"]


async def handle(gw: GatewayApprover, req: dict[str, Any]) -> dict[str, Any]:
    """Answer one request. Refusals become ``{"ok": false, "error": ...}``; nothing raises."""
    try:
        op = req.get("op")
        if op == "ask":
            ans = await gw.ask(parse(Plan, req.get("plan"), "plan"), str(req.get("requirementId")))
        elif op == "poll":
            ans = await gw.poll(str(req.get("txnId")), str(req.get("requirementId")))
        elif op == "withdraw":
            await gw.withdraw(str(req.get("txnId")), str(req.get("requirementId")))
            return {"ok": True}
        elif op == "decide":
            s = await gw.decide(str(req.get("askId")), str(req.get("human")), str(req.get("action")), req.get("value"))
            return {"ok": True, "state": s.state, "vote": s.vote, "evidence": s.evidence}
        else:
            return {"ok": False, "error": {"rule": "HATP-OBJ-3", "reason": f"unknown op {op!r}"}}
        return {"ok": True, "vote": ans.vote, "approval": ans.approval}
    except HatpError as exc:
        return {"ok": False, "error": exc.to_dict()}
    except KeyError as exc:
        return {"ok": False, "error": {"rule": "HATP-GW-14", "reason": f"no such ask {exc.args[0]!r}"}}


async def serve(gw: GatewayApprover) -> None:
    stdin = anyio.wrap_file(sys.stdin)
    async with anyio.create_task_group() as tg:
        await tg.start(gw.run)
        print(json.dumps({"ready": True}), flush=True)
        async for line in stdin:
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except ValueError:
                out: dict[str, Any] = {"ok": False, "error": {"rule": "HATP-OBJ-1", "reason": "not JSON"}}
            else:
                out = await handle(gw, req) if isinstance(req, dict) else {"ok": False}
            print(json.dumps(out), flush=True)
        tg.cancel_scope.cancel()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hatp-gateway", description="the Human Gateway over JSON lines (tests)")
    p.add_argument("--data", required=True, help="data dir (gateway.db is created here)")
    p.add_argument("--org", required=True, help="organisation dir: .well-known/human-card.json, cards/, contacts.json")
    p.add_argument("--key", required=True, help="the gateway's private JWK (role gateway)")
    args = p.parse_args(argv)
    directory, ignored, contacts = load_org(args.org)
    for card in ignored:
        print(f"hatp-gateway: ignored card {card.card_id}: {card.rule} {card.reason}", file=sys.stderr)
    key = SigningKey.from_jwk(json.loads(Path(args.key).read_text()))
    Path(args.data).mkdir(parents=True, exist_ok=True)
    store = GatewayStore(args.data)
    for human, book in contacts.items():
        for channel, address in book.items():
            store.set_contact(human, channel, address)
    gw = GatewayApprover(directory=directory, key=key, store=store, clock=SystemClock())
    try:
        anyio.run(serve, gw)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

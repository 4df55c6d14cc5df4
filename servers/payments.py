"""Payments: a card authorization held for a transaction (`card.authorize`, hold) and a capture (`card.capture`,
final: nothing undoes it)."""

from __future__ import annotations

from servers._operations import FinalOp, HoldOp, resource_key
from servers._participant import OpSpec, ToolServer, main

SPEC = ToolServer(
    "payments",
    "mcp://payments.example/hatp",
    "card",
    [
        OpSpec("card.authorize", "hold", HoldOp, resource_key("card", "payee")),
        OpSpec("card.capture", "final", FinalOp, resource_key("card")),
    ],
)

if __name__ == "__main__":
    raise SystemExit(main(SPEC))

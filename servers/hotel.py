"""The hotel: rooms held for a transaction (`room.hold`, tier hold)."""

from __future__ import annotations

from servers._operations import HoldOp, resource_key
from servers._participant import OpSpec, ToolServer, main

SPEC = ToolServer(
    "hotel",
    "mcp://hotel.example/hatp",
    "room",
    [OpSpec("room.hold", "hold", HoldOp, resource_key("hotel", "checkIn"))],
)

if __name__ == "__main__":
    raise SystemExit(main(SPEC))

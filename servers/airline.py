"""The airline: seats held for a transaction (`seat.hold`, tier hold)."""

from __future__ import annotations

from servers._operations import HoldOp, resource_key
from servers._participant import OpSpec, ToolServer, main

SPEC = ToolServer(
    "airline",
    "mcp://airline.example/hatp",
    "seat",
    [OpSpec("seat.hold", "hold", HoldOp, resource_key("flight", "date", "seat"))],
)

if __name__ == "__main__":
    raise SystemExit(main(SPEC))

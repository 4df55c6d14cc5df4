"""The calendar: events created at commit and deleted to compensate (`event.create`, tier compensate)."""

from __future__ import annotations

from servers._operations import CompensateOp, resource_key
from servers._participant import OpSpec, ToolServer, main

SPEC = ToolServer(
    "calendar",
    "mcp://calendar.example/hatp",
    "event",
    [OpSpec("event.create", "compensate", CompensateOp, resource_key("calendar", "start"))],
)

if __name__ == "__main__":
    raise SystemExit(main(SPEC))

"""`make demo-mcp`: the trip across separate MCP server processes (demo.trip_mcp). `demo.evidence` is the
single-process evidence walk-through."""

from __future__ import annotations

from demo import trip_mcp


def main(argv: list[str] | None = None) -> int:
    return trip_mcp.main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

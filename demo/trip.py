"""`make demo-mcp`. Until the multi-process MCP demo lands, this runs the evidence demo (demo.evidence)."""

from __future__ import annotations

from demo import evidence


def main() -> int:
    return evidence.main()


if __name__ == "__main__":
    raise SystemExit(main())

"""Demos: `make demo-mcp` runs demo.trip."""

"""The sans-IO core: pure functions and state machines.

Nothing under hatp_mcp.core imports anyio, mcp, sqlite3, os, time or socket, reads a clock or waits.
tests/test_layering.py enforces this.
"""

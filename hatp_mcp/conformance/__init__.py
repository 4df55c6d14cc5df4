"""Conformance: the checks `hatp conformance` runs against another implementation's MCP server.

A check sends what a coordinator (or a hostile caller) would send to a server that claims HATP, over the official
MCP SDK client (raw bytes only where a check must send malformed ones), and compares what comes back with what the
spec's rule demands: each result names the rule id, what was sent, what was expected and what came back. This
package may use hatp_mcp.mcp, hatp_mcp.runtime and the core; nothing below it imports it. It keeps no state
between runs except the runner's own coordinator identity (target.py).
"""

"""Conformance: the checks `hatp conformance` runs against another implementation's MCP server.

A check sends what a coordinator (or a hostile caller) would send to a server that claims HATP, over the official
MCP SDK client (raw bytes only where a check must send malformed ones), and compares what comes back with what the
spec's rule demands: each result names the rule id, what was sent, what was expected and what came back. This
package may use hatp_mcp.mcp, hatp_mcp.runtime, the stores and the core; nothing below it imports it. It keeps no
state between runs except the runner's own coordinator identity (target.py).

- target.py: the server under test (a command or a URL) and the runner's own coordinator identity it must trust;
- session.py: one run's session: the MCP client, the runner's identity, the report, the plumbing every check uses;
- exchange.py: one hatp/* request kept as what came back (result, JSON-RPC error or no answer), untranslated;
- participant.py: the participant checks: ordinary flows, and planted violations refused with no effect;
- gateway.py: the Human Gateway checks: one approval requirement asked for, proven and unproven;
- wire.py: the wire-limit checks (HATP-WIRE-1/2): malformed messages sent as raw lines or raw POSTs;
- report.py: the report: one result per check, as text or JSON; a check that could not run is skipped, not passed.
"""

"""hatp-mcp: the Human-Agent Transaction Protocol as a suite of MCP servers.

Its parts, top layer first; each imports only the parts below it (import-linter, pyproject.toml):

- cli/: `hatp`, the command line; the one place core errors become exit codes;
- adapters/: the journal for Python agent frameworks (PydanticAI, OpenAI Agents, LangChain), an extra each;
- conformance/: the checks `hatp conformance` runs against another implementation's MCP server;
- mcp/: the MCP binding: hatp/* methods over the official MCP SDK, the servers and their clients;
- web/: the inbox a person decides in with their browser, served by the gateway process;
- runtime/: drivers that feed events to the core, persist before sending and arm deadlines from absolute times;
- store/: durable state behind one Protocol per store, on SQLite by default or PostgreSQL;
- core/: the sans-IO core: the protocol's pure functions and state machines;
- errors.py: `HatpError`, the one error base: every refusal names its rule id, JSON path and fix.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"

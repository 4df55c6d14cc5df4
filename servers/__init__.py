"""One thin entry point per MCP server process: `python -m servers.<name> --transport stdio|http`."""

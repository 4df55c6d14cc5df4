"""hatp-mcp: the Human-Agent Transaction Protocol as a suite of MCP servers."""

__all__ = ["__version__"]

__version__ = "0.1.0"

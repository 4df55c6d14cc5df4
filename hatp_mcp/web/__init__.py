"""The web binding: the inbox a person uses in their browser (inbox.py, pages.py), served by the gateway process.
Beside hatp_mcp.mcp in the layers: may import runtime, store and the core; the core knows nothing of it."""

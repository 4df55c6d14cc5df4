"""The MCP binding of HATP: hatp/* methods as custom JSON-RPC requests over the official MCP SDK.

`errors` is the one place core errors become JSON-RPC errors (and back); `extension` advertises HATP in a
server's capabilities; `participant_server.serve_hatp` makes an MCP server a participant; `participant_client`
gives a coordinator a participant over a client session; `serve` and `launch` run and start server processes.
"""

__all__: list[str] = []

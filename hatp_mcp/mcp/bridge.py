"""A stdio-to-streamable-HTTP relay: what `hatp connect` runs for a client that starts a command.

The client (Claude Desktop, the MCP Inspector's CLI) speaks MCP over this process's stdin and stdout; every
message is passed as it is to the server's streamable HTTP endpoint and every answer back, with the SDK's own
transports on both sides (the stdio server transport and the streamable HTTP client transport). The bridge holds
no state of the protocol: the session, its transactions and their asks live in the server, so a bridge that exits
(the client quit, or opens a new bridge per call) ends nothing there (HATP-MCP-41). When a bearer token is given
every request carries it (`Authorization: Bearer ...`); it is never logged. This module speaks no HATP.

The SDK is imported only when the relay is ready to start (`load_sdk`): a bridge that starts a stopped service
starts it first and loads the SDK while the service starts, so a client's connect waits for the slower of the two,
not for both one after the other.
"""

from __future__ import annotations

import importlib
import stat
import sys
from pathlib import Path

import anyio

from hatp_mcp.store.private_files import read_private

__all__ = ["TokenFileError", "load_sdk", "read_token", "relay"]

_SDK = ("mcp.client.streamable_http", "mcp.server.stdio", "mcp.shared._httpx_utils")


def load_sdk() -> None:
    """Import the parts of the MCP SDK the relay uses (blocking: call it in a worker thread to overlap it)."""
    for name in _SDK:
        importlib.import_module(name)


class TokenFileError(ValueError):
    """A token file that cannot be used: unreadable, empty, or readable by others (HATP-MCP-46)."""


def read_token(path: Path) -> str:
    """The bearer token in `path`: one line, in a file only its owner may read or write (0600 or stricter).

    Raises TokenFileError (the message names the file and the fix, never the token)."""
    try:
        mode, raw = read_private(path, lambda m: not m & (stat.S_IRWXG | stat.S_IRWXO))
    except OSError as exc:
        raise TokenFileError(f"{path}: cannot read the token file: {exc.strerror or exc}") from exc
    if raw is None:
        raise TokenFileError(
            f"{path}: a token file is the owner's alone (mode {stat.S_IMODE(mode):04o}); fix: chmod 600 {path} "
            "(HATP-MCP-46)"
        )
    text = raw.decode().strip()
    if not text or any(c.isspace() for c in text):
        raise TokenFileError(f"{path}: the token file holds one token on one line (HATP-MCP-46)")
    return text


def _say(message: str) -> None:
    print(f"hatp connect: {message}", file=sys.stderr, flush=True)


async def relay(url: str, token: str | None = None) -> None:
    """Relay this process's stdio MCP to `url` until the client closes stdin (or the server goes away)."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.stdio import stdio_server
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (from_server, to_server):
            async with stdio_server() as (from_client, to_client):
                async with anyio.create_task_group() as tg:

                    async def upstream() -> None:
                        async with to_server:
                            async for message in from_client:
                                if isinstance(message, Exception):  # a line that is no JSON-RPC: not passed on
                                    _say(f"ignored a message from the client that is not JSON-RPC: {message}")
                                    continue
                                await to_server.send(message)
                        tg.cancel_scope.cancel()  # the client closed stdin: this session is over

                    async def downstream() -> None:
                        async with to_client:
                            async for message in from_server:
                                if isinstance(message, Exception):
                                    _say(f"the server's answer could not be read: {message}")
                                    continue
                                await to_client.send(message)
                        tg.cancel_scope.cancel()

                    tg.start_soon(upstream)
                    tg.start_soon(downstream)

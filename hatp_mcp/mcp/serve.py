"""Running one MCP server as its own process over stdio or streamable HTTP, and stopping it cleanly.

`serve(server, transport, port)` is what every `python -m servers.<name>` ends in. Over HTTP it binds 127.0.0.1
itself (port 0 picks a free one) and, once uvicorn accepts connections, writes the one readiness line
`HATP_READY port=<n> pid=<p>` to stderr (HATP-MCP-7). SIGTERM and SIGINT end it with status 0 (uvicorn's own
signal capture is off: it would re-raise them); so does end of stdin when `parent_watch` is set, so a server
started by a launcher that dies does not outlive it. Nothing here writes to stdout: in stdio mode stdout is the
wire. This module knows no HATP methods.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import signal
import socket
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import anyio.to_thread
from mcp.server import MCPServer, Server
from mcp.server.stdio import stdio_server

from hatp_mcp.mcp.hatp_methods import lowlevel_of
from hatp_mcp.mcp.stdio_pipes import claim_stdio
from hatp_mcp.mcp.wire_guard import GuardedApp, screen_line
from hatp_mcp.runtime.gc_tuning import settle_heap
from hatp_mcp.runtime.service.supervisor import READY_PREFIX

__all__ = [
    "READY_PREFIX",
    "add_server_arguments",
    "add_trust_argument",
    "bind_loopback",
    "log",
    "quiet",
    "serve",
    "serve_http_beside",
]


def log(message: str) -> None:
    """One line on stderr (never stdout: that is the stdio wire)."""
    print(message, file=sys.stderr, flush=True)


def quiet() -> None:
    """Silence the SDK's deprecation warnings and chatty loggers; a server's stderr is for its own lines."""
    warnings.simplefilter("ignore")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for name in ("mcp", "uvicorn", "uvicorn.error", "httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.ERROR)


def add_server_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0: any free port)")
    p.add_argument("--data", default=None, help="directory for the SQLite state and the signing key")
    p.add_argument("--parent-watch", action="store_true", help="HTTP: exit when stdin reaches end of file")


def add_trust_argument(p: argparse.ArgumentParser) -> None:
    """`--trusted-coordinators [ID=]FILE`, for a server that acts for coordinators (HATP-TRUST-10)."""
    p.add_argument(
        "--trusted-coordinators",
        metavar="[ID=]FILE",
        help="JWKS (or JWK) of the coordinators this server acts for: role coordinator, each key's 'party' its id "
        "(ID= binds keys that name none); default DATA/trusted-coordinators.json; none: state changes are refused",
    )


async def _on_signal(stop: Callable[[], None]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop()
            return


async def _on_stdin_eof(stop: Callable[[], None]) -> None:
    await anyio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
    stop()


async def _serve_stdio(low: Server[Any]) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_on_signal, tg.cancel_scope.cancel)
        # the SDK's stdio transport, reading and writing the pipes from the event loop (hatp_mcp/mcp/stdio_pipes.py);
        # each line meets the wire's limits before the SDK parses it (hatp_mcp/mcp/wire_guard.py, HATP-WIRE-1)
        async with claim_stdio(screen_line) as pipes:
            stdin, stdout = pipes if pipes is not None else (None, None)
            async with stdio_server(stdin, stdout) as (read, write):  # type: ignore[arg-type]
                await low.run(read, write, low.create_initialization_options())  # returns on stdin EOF
        tg.cancel_scope.cancel()


def _http_server(app: Any, port_holder: list[int]) -> Any:
    import uvicorn  # only HTTP servers pay for uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:  # we own SIGTERM/SIGINT (exit 0, no re-raise)
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:
                log(f"{READY_PREFIX} port={port_holder[0]} pid={os.getpid()}")

    return _Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, lifespan="on"))


def bind_loopback(port: int) -> socket.socket:
    """A TCP socket bound on 127.0.0.1:`port` (0: any free port). Raises OSError (e.g. the port is taken)."""
    # IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on accepted sockets of that proto; with proto 0 every
    # JSON response waits for the client's delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


@contextlib.asynccontextmanager
async def serve_http_beside(server: MCPServer | Server[Any], sock: socket.socket) -> AsyncIterator[None]:
    """Serve `server` over streamable HTTP on the bound `sock` beside its main transport (the gateway's stdio)
    while the context is open; the main transport owns the signals and the process's end. Leaving stops uvicorn
    the graceful way (open streams get its shutdown timeout), not by cancelling it mid-lifespan."""
    http = _http_server(GuardedApp(server.streamable_http_app(host="127.0.0.1")), [sock.getsockname()[1]])
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(http.serve, sockets=[sock]))
        try:
            yield
        finally:
            http.should_exit = True


async def _serve_http(server: MCPServer | Server[Any], port: int, parent_watch: bool) -> None:
    app = GuardedApp(server.streamable_http_app(host="127.0.0.1"))  # the wire's limits first (HATP-WIRE-1)
    sock = bind_loopback(port)
    http = _http_server(app, [sock.getsockname()[1]])

    def stop() -> None:
        http.should_exit = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(_on_signal, stop)
        if parent_watch:
            tg.start_soon(_on_stdin_eof, stop)
        await http.serve(sockets=[sock])
        tg.cancel_scope.cancel()


async def serve(server: MCPServer | Server[Any], transport: str, port: int = 0, *, parent_watch: bool = False) -> None:
    """Serve until stdin ends (stdio), a signal arrives, or (HTTP with `parent_watch`) the parent lets go."""
    settle_heap()  # the server is set up: what is alive now stays, and is not walked by every collection again
    if transport == "stdio":
        await _serve_stdio(lowlevel_of(server))
    else:
        await _serve_http(server, port, parent_watch)

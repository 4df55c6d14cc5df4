"""The process's stdin and stdout as event-loop pipes, for the MCP SDK's own stdio server transport.

`mcp.server.stdio.stdio_server(stdin, stdout)` takes the two text streams it reads lines from and writes lines to;
by default it wraps the standard files with `anyio.wrap_file`, so every line read and every write and flush is a hop
to a worker thread and back (three per request). These streams read and write the same descriptors from the event
loop itself (non-blocking pipes), and the SDK does everything else as before: framing, parsing, validation,
dispatch.

What the SDK does to descriptors when it owns them is kept: while serving, fd 0 reads the null device and fd 1
writes to stderr, so a handler or child process that reads stdin sees end of file and one that prints misses the
wire; both are put back on exit. Where fd 0 or fd 1 is not a pipe or a socket (a terminal, /dev/null, a regular
file: an MCP client always gives pipes), or the loop cannot poll it, `claim_stdio` changes nothing and yields None,
and the caller uses the SDK's default.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

__all__ = ["LINE_LIMIT", "PipeLines", "PipeWriter", "claim_stdio"]

LINE_LIMIT = 1 << 30  # the SDK's default reader has no line limit; one message is never near a gigabyte


Screen = Callable[[bytes], Awaitable[bool]]


class PipeLines:
    """Lines of text from a non-blocking pipe (what `async for line in stdin` needs). With a `screen`, each line's
    bytes are shown to it first, and a line it refuses is never handed on (hatp_mcp/mcp/wire_guard.py)."""

    def __init__(self, reader: asyncio.StreamReader, screen: Screen | None = None) -> None:
        self._reader = reader
        self._screen = screen

    def __aiter__(self) -> PipeLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._reader.readline()
            if not line:
                raise StopAsyncIteration
            if self._screen is None or await self._screen(line):
                return line.decode("utf-8", errors="replace")  # as the SDK's own wrapper decodes


class PipeWriter:
    """Text to a non-blocking pipe (`write` then `flush`, as the SDK's stdout writer calls them)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


Answer = Callable[[str], Awaitable[None]]
# (a line's bytes, a way to answer on the wire) -> may the line go on
LineScreen = Callable[[bytes, Answer], Awaitable[bool]]


async def _connect(
    wire_in: int, wire_out: int, screen: LineScreen | None
) -> tuple[PipeLines, PipeWriter, list[asyncio.BaseTransport]]:
    """Both pipes on the running loop. Raises OSError or ValueError when the loop cannot poll one; then nothing
    stays open (a descriptor not yet handed to a transport is closed here)."""
    loop = asyncio.get_running_loop()
    files = [os.fdopen(wire_in, "rb", buffering=0), os.fdopen(wire_out, "wb", buffering=0)]
    transports: list[asyncio.BaseTransport] = []
    try:
        reader = asyncio.StreamReader(limit=LINE_LIMIT)
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), files[0])
        transports.append(read_transport)
        write_transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, files[1])
        transports.append(write_transport)
    except BaseException:
        for t in transports:
            t.close()
        for f in files[len(transports) :]:
            f.close()
        raise
    out = PipeWriter(asyncio.StreamWriter(write_transport, protocol, None, loop))

    async def answer(text: str) -> None:  # one whole line, between the SDK's own lines
        await out.write(text)
        await out.flush()

    lines = PipeLines(reader, None if screen is None else lambda raw: screen(raw, answer))
    return lines, out, transports


@asynccontextmanager
async def claim_stdio(screen: LineScreen | None = None) -> AsyncIterator[tuple[PipeLines, PipeWriter] | None]:
    """Take fd 0 and fd 1 for the wire (see the module docstring); None, with nothing changed, when they are not
    pipes the loop can poll. `screen` sees each line's bytes first (hatp_mcp/mcp/wire_guard.py)."""
    if not (_pipe(0) and _pipe(1)):
        yield None
        return
    try:
        lines, writer, transports = await _connect(os.dup(0), os.dup(1), screen)
    except (OSError, ValueError):
        yield None
        return
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # a handler or child that reads stdin sees end of file
    os.close(null)
    os.dup2(2, 1)  # one that prints writes to stderr, never into the wire
    try:
        yield lines, writer
    finally:
        for t in transports:
            t.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)

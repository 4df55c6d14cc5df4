"""Starting server processes from a parent (tests, the demo, the bench) and making sure they end.

`stdio_params` describes a `python -m servers.<name> --transport stdio` child for `mcp.Client` (the SDK spawns it
and closes its stdin on exit). `launch_http` starts an HTTP server child, waits (bounded, never sleeping) for its
`HATP_READY port=<n>` line on stderr, keeps draining stderr so the child never blocks on a full pipe, and on exit
stops it: stdin closed (the child's parent watch), SIGTERM, then SIGKILL after a grace period. No orphans. This
module speaks no HATP.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import DEVNULL, PIPE
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import StdioServerParameters

from hatp_mcp.errors import BrokenInvariant
from hatp_mcp.mcp.serve import READY_PREFIX

__all__ = ["HttpProcess", "LaunchError", "launch_http", "server_args", "stdio_params"]

ROOT = Path(__file__).resolve().parents[2]


class LaunchError(RuntimeError):
    """A server process did not become ready (it exited, or said nothing in time); carries its last lines."""


def server_args(module: str, transport: str, data: str | Path | None, extra: Sequence[str] = ()) -> list[str]:
    args = ["-m", module, "--transport", transport]
    if data is not None:
        args += ["--data", str(data)]
    return [*args, *extra]


def stdio_params(module: str, data: str | Path | None, extra: Sequence[str] = ()) -> StdioServerParameters:
    """Parameters for `mcp.Client` / `stdio_client` to run `module` as a stdio child from the repository root."""
    return StdioServerParameters(command=sys.executable, args=server_args(module, "stdio", data, extra), cwd=str(ROOT))


@dataclass
class HttpProcess:
    """A running HTTP server child."""

    module: str
    process: Process
    port: int
    lines: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL, as a crash would (tests of a participant dying mid-transaction)."""
        if self.process.returncode is None:
            self.process.kill()

    async def stop(self, grace: float = 5.0) -> int | None:
        """Close stdin and SIGTERM; SIGKILL if it has not exited after `grace` seconds. Returns the exit code."""
        if self.process.returncode is None:
            if self.process.stdin is not None:
                await self.process.stdin.aclose()
            self.process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(grace, shield=True):
            return await self.process.wait()
        self.process.kill()
        with anyio.fail_after(grace, shield=True):
            return await self.process.wait()


async def _drain(stream: BufferedByteReceiveStream, lines: list[str]) -> None:
    try:
        while True:
            lines.append((await stream.receive_until(b"\n", 1 << 20)).decode(errors="replace"))
            del lines[:-200]  # keep the tail only
    except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError, anyio.BrokenResourceError):
        return


@asynccontextmanager
async def launch_http(
    module: str,
    data: str | Path | None,
    *,
    port: int = 0,
    ready_timeout: float = 30.0,
    extra: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[HttpProcess]:
    """Start `python -m module --transport http --port N --parent-watch` and yield it once ready.

    Raises LaunchError if it exits or is not ready within `ready_timeout` seconds.
    """
    cmd = [sys.executable, *server_args(module, "http", data, ["--port", str(port), "--parent-watch", *extra])]
    kwargs: dict[str, Any] = {"stdin": PIPE, "stdout": DEVNULL, "stderr": PIPE, "cwd": str(ROOT)}
    if env is not None:
        kwargs["env"] = env
    process = await anyio.open_process(cmd, **kwargs)
    if process.stderr is None:
        raise BrokenInvariant("a server process opened without a stderr pipe")
    stream = BufferedByteReceiveStream(process.stderr)
    lines: list[str] = []
    proc: HttpProcess | None = None
    try:
        with anyio.fail_after(ready_timeout):
            while proc is None:
                try:
                    line = (await stream.receive_until(b"\n", 1 << 20)).decode(errors="replace")
                except (anyio.EndOfStream, anyio.IncompleteRead):
                    raise LaunchError(f"{module} exited before it was ready: {lines[-10:]}") from None
                lines.append(line)
                if line.startswith(READY_PREFIX):
                    fields = dict(part.split("=", 1) for part in line.split()[1:])
                    proc = HttpProcess(module, process, int(fields["port"]), lines)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise LaunchError(f"{module} was not ready within {ready_timeout}s: {lines[-10:]}") from None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, stream, lines)
            try:
                yield proc
            finally:
                await proc.stop()
                tg.cancel_scope.cancel()
    finally:
        if process.returncode is None:  # pragma: no cover - stop() already waited
            process.kill()

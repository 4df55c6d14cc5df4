"""The stdio server's pipes read and written from the event loop (hatp_mcp/mcp/stdio_pipes.py), in a real child
process: lines in and out, stray output kept off the wire, the descriptors put back, and the fallback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import os, sys, anyio
from hatp_mcp.mcp.stdio_pipes import claim_stdio

async def main():
    async with claim_stdio() as pipes:
        if pipes is None:
            print("NOT CLAIMED", file=sys.stderr, flush=True)
        else:
            lines, out = pipes
            print("stray print", flush=True)
            os.write(1, b"stray write\\n")
            print("stdin reads", repr(os.read(0, 10)), file=sys.stderr, flush=True)
            async for line in lines:
                await out.write(f"echo {len(line)} {line[:5]}\\n")
                await out.flush()
    print("after", flush=True)

anyio.run(main)
"""


def run_child(stdin: int | None, data: bytes | None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", CHILD],
        stdin=stdin,
        input=data,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=True,
    )


def test_lines_come_in_and_go_out_through_the_pipes_and_stray_output_misses_the_wire() -> None:
    big = "x" * 300_000  # well past asyncio's default 64 KiB line limit: one message may be large
    done = run_child(None, f"hello\n{big}\n".encode())
    # only the wire's lines on stdout while claimed; once the claim ends, fd 1 is stdout again
    assert done.stdout.decode().splitlines() == ["echo 6 hello", "echo 300001 xxxxx", "after"]
    err = done.stderr.decode()
    assert "stray print" in err and "stray write" in err  # fd 1 pointed at stderr while serving
    assert "stdin reads b''" in err  # fd 0 read the null device, the wire was not taken from under the reader


def test_a_stdin_that_is_not_a_pipe_is_left_alone_for_the_sdks_default(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("hello\n")
    with source.open("rb") as f:
        done = run_child(f.fileno(), None)
    assert "NOT CLAIMED" in done.stderr.decode()
    assert done.stdout.decode().splitlines() == ["after"]

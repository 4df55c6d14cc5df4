"""A crash test's child process (`python CHILD WORKDIR MODE PAUSE_AT`), its stdout read line by line: select, then
os.read, each wait bounded, never a sleep."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Child:
    """One run of a crash child script; `read_until(marker)` returns every line read up to the marker's line."""

    def __init__(self, script: Path, workdir: Path, mode: str, pause_at: int = 0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(workdir), mode, str(pause_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )
        self.buffer = b""
        self.lines: list[str] = []

    def read_until(self, marker: str, timeout: float = 30.0) -> list[str]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                self.lines.append(line.decode())
                if self.lines[-1].startswith(marker):
                    return self.lines
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, f"child said nothing for {timeout}s; so far {self.lines}"
            chunk = os.read(fd, 65536)
            assert chunk, f"child exited before {marker!r}: {self.lines}"
            self.buffer += chunk


def finish(child: Child) -> list[str]:
    """The child's lines through its closing STEPS line, once it exited 0."""
    lines = child.read_until("STEPS")
    assert child.proc.wait(timeout=30) == 0
    return lines


def killed(child: Child) -> list[str]:
    """SIGKILL the child once it says PAUSED (it stopped at its pause step, that step on disk); its lines so far."""
    lines = child.read_until("PAUSED")
    os.kill(child.proc.pid, signal.SIGKILL)
    assert child.proc.wait(timeout=30) == -signal.SIGKILL
    return lines

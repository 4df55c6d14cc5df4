"""CPU seconds of this process and of its child processes (the servers a bench starts), from Linux /proc.

On a shared machine wall time swings with the neighbours' load; CPU per call swings much less, so the benches
print both. Where /proc is not there the children are unknown and their CPU reads 0.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["children", "cpu_seconds", "main_thread_cpu", "own_cpu"]


def children(pid: int | None = None) -> list[int]:
    """Child process ids of process `pid` (default: this one) (Linux); empty where /proc is not there."""
    me = Path(f"/proc/{os.getpid() if pid is None else pid}/task")
    if not me.is_dir():
        return []
    out: list[int] = []
    for task in me.iterdir():
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def cpu_seconds(pid: int) -> float:
    """CPU seconds of process `pid`, every thread (0.0 when it cannot be read): the scheduler's run time in
    nanoseconds summed over its live threads (/proc/PID/task/*/schedstat; a server's threads, its worker threads
    included, live through a bench), else user + system time in clock ticks (/proc/PID/stat; a tick is 10 ms,
    coarse against the few ms a trip costs one server)."""
    try:
        return sum(int((t / "schedstat").read_text().split()[0]) for t in Path(f"/proc/{pid}/task").iterdir()) / 1e9
    except (OSError, IndexError, ValueError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """This process's CPU seconds, every thread."""
    return time.process_time()


def main_thread_cpu() -> float:
    """CPU seconds of this process's main thread alone (the one running the bench's event loop: the coordinator's
    protocol work and the MCP client's), so what the other threads spent (the durable log's worker, which waits in
    fsync) is the rest of own_cpu(); 0.0 where /proc is not there."""
    try:
        return int(Path(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0

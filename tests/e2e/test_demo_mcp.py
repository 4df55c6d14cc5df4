"""`make demo-mcp` end to end: seven server processes, one trip committed (a scripted person approving through the
gateway's MCP tools), one aborted, both records verified, and no process left behind, also after Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from demo.trip_mcp import run_trip

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def children() -> set[int]:
    me = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[1] == me and fields[0] != "Z":
                found.add(int(entry.name))
    return found


async def test_the_mcp_demo_commits_the_trip_aborts_the_sold_out_one_and_leaves_no_process(tmp_path: Path) -> None:
    before = children()
    lines: list[str] = []
    with anyio.fail_after(120):
        outcomes = await run_trip(tmp_path, out=lines.append)
    assert sorted(outcomes.values()) == ["ABORTED", "COMMITTED"]
    assert sum("hatp verify" in line and ": ok" in line for line in lines) == 2
    assert any("decision=abort" in line and "room voted no" in line for line in lines)
    assert any("approves" in line and "/finance in the gateway: approved" in line for line in lines)
    assert any(line.startswith("started 7 MCP server processes") for line in lines)
    assert children() <= before


def servers_using(data: Path) -> list[str]:
    """Every process whose command line names `data` (the demo's servers, wherever they were reparented)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(data) in cmd and "servers." in cmd:
                found.append(cmd)
    return found


async def test_ctrl_c_during_the_mcp_demo_stops_every_server_process(tmp_path: Path) -> None:
    # --interactive: the demo waits for a person with every server running, so the ctrl-c surely lands mid-run (the
    # plain demo can finish both trips before a loaded machine delivers the signal, and then rightly exits 0)
    cmd = [sys.executable, "-m", "demo.trip", "--interactive", "--data", str(tmp_path)]
    lines: list[str] = []
    with anyio.fail_after(90):
        async with await anyio.open_process(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) as proc:
            assert proc.stdout is not None
            stream = BufferedByteReceiveStream(proc.stdout)
            while not lines or " approve txn-" not in lines[-1]:
                lines.append((await stream.receive_until(b"\n", 1 << 16)).decode())
            running = servers_using(tmp_path)
            proc.send_signal(signal.SIGINT)
            code = await proc.wait()
            assert proc.stderr is not None
            err = b"".join([chunk async for chunk in proc.stderr]).decode(errors="replace")
    assert lines[0].startswith("started 7 MCP server processes") and len(running) == 7
    assert code == 130, (code, err[-3000:])
    assert servers_using(tmp_path) == []


async def test_the_interactive_demo_waits_for_a_person_who_approves_with_the_printed_inbox_command(
    tmp_path: Path,
) -> None:
    cmd = [sys.executable, "-m", "demo.trip", "--interactive", "--data", str(tmp_path)]
    lines: list[str] = []
    with anyio.fail_after(120):
        async with await anyio.open_process(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) as proc:
            assert proc.stdout is not None
            stream = BufferedByteReceiveStream(proc.stdout)
            while not lines or " approve txn-" not in lines[-1]:
                lines.append((await stream.receive_until(b"\n", 1 << 16)).decode())
            approve = lines[-1].split()
            person = await anyio.run_process(approve, check=False)
            rest = (await stream.receive_until(b"all server processes stopped", 1 << 20)).decode()
            code = await proc.wait()
    assert approve[1:4] == ["inbox", "--data", str(tmp_path / "gateway")]
    assert person.returncode == 0, person.stderr.decode()
    assert code == 0 and "=> COMMITTED" in rest and "=> ABORTED" in rest

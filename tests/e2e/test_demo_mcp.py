"""`make demo-mcp` end to end: four server processes, one trip committed, one aborted, both records verified,
and no process left behind."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from demo.trip_mcp import run_trip

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
    assert children() <= before

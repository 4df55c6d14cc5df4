"""Kill the coordinator process (SIGKILL) at each durable step of phase 1 and phase 2, and after each commit a
participant answered before the coordinator recorded it; start a replacement, and check: every branch committed or
none, no effect performed twice, the record verifies (HATP-TXN-12, HATP-TXN-4)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hatp_mcp.core.evidence.keys import Keyring
from hatp_mcp.core.txn.record import verify_record

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("crash_child.py")
TXN = "txn-crash-0001"


class Child:
    """A child process whose stdout is read line by line without buffering surprises (select, then os.read)."""

    def __init__(self, workdir: Path, mode: str, pause_at: int = 0) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(workdir), mode, str(pause_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
        )
        self.buffer = b""
        self.lines: list[str] = []

    def read_until(self, marker: str, timeout: float = 30.0) -> list[str]:
        """Bounded: each wait for output is a select with a timeout, never a sleep."""
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
    lines = child.read_until("STEPS")
    assert child.proc.wait(timeout=30) == 0
    return lines


def effects(workdir: Path) -> list[str]:
    path = workdir / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def check_all_or_nothing(workdir: Path, outcome: str) -> None:
    done = effects(workdir)
    assert len(done) == len(set(done)), f"an effect was performed twice: {done}"
    committed = {e.split()[0] for e in done if e.split()[1] in ("book", "create", "capture")}
    undone = {e.split()[0] for e in done if e.split()[1] in ("delete", "release")}
    if outcome == "COMMITTED":
        assert committed == {"seat", "room", "event", "pay"} and not undone
    else:
        assert outcome == "ABORTED"
        assert committed - undone <= {"event"} and ("event" not in committed or "event" in undone)
        assert "pay" not in committed and {"seat", "room"}.isdisjoint(committed)
        held = {e.split()[0] for e in done if e.split()[1] == "hold"}
        assert held <= undone, f"a hold was never released: {done}"


@pytest.mark.e2e
def test_a_replacement_coordinator_finishes_after_a_sigkill_at_every_durable_step(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    lines = finish(Child(baseline, "run"))
    assert "DONE COMMITTED" in lines
    steps = int(lines[-1].split()[1])
    said = [line.split(" ", 2)[2] for line in lines if line.startswith("STEP ")]
    # begin; the prepares with the decision; the calendar, the payment and both holds answered; the close
    assert said[:4] == ["durable write 1", "durable write 2", "event answered its commit", "pay answered its commit"]
    assert set(said[4:6]) == {"seat answered its commit", "room answered its commit"} and said[6:] == [
        "durable write 3"
    ], said
    seen = set()
    for pause_at in range(1, steps):
        workdir = tmp_path / f"kill-{pause_at}"
        workdir.mkdir()
        child = Child(workdir, "run", pause_at)
        child.read_until("PAUSED")
        os.kill(child.proc.pid, signal.SIGKILL)  # HATP-TXN-12: the coordinator dies with step pause_at on disk
        assert child.proc.wait(timeout=30) == -signal.SIGKILL
        replacement = finish(Child(workdir, "recover"))
        outcome = next(line.split()[1] for line in replacement if line.startswith("DONE"))
        check_all_or_nothing(workdir, outcome)
        record = json.loads((workdir / "record.json").read_text())
        ring = Keyring.from_jwks(json.loads((workdir / "keyring.json").read_text()))
        assert verify_record(record, ring) == []
        assert "coordinator.recovered" in [e["event"] for e in record["events"]]
        seen.add(outcome)
    assert seen == {"COMMITTED", "ABORTED"}

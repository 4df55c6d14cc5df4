"""Kill the coordinator process (SIGKILL) at each durable step of phase 1 and phase 2, and after each commit a
participant answered before the coordinator recorded it; start a replacement, and check: every branch committed or
none, no effect performed twice, the record verifies (HATP-TXN-12, HATP-TXN-4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.txn_api import TxnStatus
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.core.txn.status import summarize
from hatp_mcp.store.txn_log import SqliteTxnLog
from tests.crash.child_process import Child, finish, killed

CHILD = Path(__file__).with_name("crash_child.py")
TXN = "txn-crash-0001"


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
    lines = finish(Child(CHILD, baseline, "run"))
    assert "DONE COMMITTED" in lines
    steps = int(lines[-1].split()[1])
    said = [line.split(" ", 2)[2] for line in lines if line.startswith("STEP ")]
    # begin, written ahead of its prepares, and its sync (HATP-TXN-27); the prepares with the decision; the
    # calendar and the payment answered; the write that tells the outcome (HATP-TXN-25); both holds answered; the
    # close
    assert said[:6] == [
        "durable write 1",
        "durable write 2",
        "durable write 3",
        "event answered its commit",
        "pay answered its commit",
        "durable write 4",
    ], said
    assert set(said[6:8]) == {"seat answered its commit", "room answered its commit"} and said[8:] == [
        "durable write 5"
    ], said
    seen = set()
    for pause_at in range(1, steps):
        workdir = tmp_path / f"kill-{pause_at}"
        workdir.mkdir()
        child = Child(CHILD, workdir, "run", pause_at)
        killed(child)  # HATP-TXN-12: the coordinator dies with step pause_at on disk
        replacement = finish(Child(CHILD, workdir, "recover"))
        outcome = next(line.split()[1] for line in replacement if line.startswith("DONE"))
        check_all_or_nothing(workdir, outcome)
        record = verified_record(workdir)
        assert "coordinator.recovered" in [e["event"] for e in record["events"]]
        seen.add(outcome)
    assert seen == {"COMMITTED", "ABORTED"}


@pytest.mark.e2e
def test_HATP_TXN_22_a_coordinator_killed_while_the_human_decides_is_restarted_and_commits_once_approved(
    tmp_path: Path,
) -> None:
    child = Child(CHILD, tmp_path, "ask")
    said = killed(child)  # every prepare and the gateway's pending vote are durable: APPROVING
    assert "STEP approving" in said
    assert {e.split()[0] for e in effects(tmp_path) if e.split()[1] in ("book", "create", "capture")} == set()
    restarted = finish(Child(CHILD, tmp_path, "approved"))
    assert "DONE COMMITTED" in restarted
    check_all_or_nothing(tmp_path, "COMMITTED")
    record = verified_record(tmp_path)
    recovered = [e["body"] for e in record["events"] if e["event"] == "coordinator.recovered"]
    assert recovered == [{"decision": "resumed", "phase": "approving"}]


@pytest.mark.e2e
def test_HATP_TXN_30_a_coordinator_killed_while_an_undo_is_in_doubt_is_restarted_and_sends_it_again(
    tmp_path: Path,
) -> None:
    child = Child(CHILD, tmp_path, "undo-doubt")
    said = killed(child)  # the abort is decided and the calendar's undo is in doubt
    assert "STEP undo in doubt" in said
    assert [e.split()[1] for e in effects(tmp_path) if e.startswith("event")] == ["create"]  # not undone yet
    status = answered(tmp_path)
    assert status.state == "aborting" and status.outcome is None  # nothing says it was undone
    restarted = finish(Child(CHILD, tmp_path, "recover"))
    assert "DONE ABORTED" in restarted  # the replacement sent the undo again and its calendar answered ok
    check_all_or_nothing(tmp_path, "ABORTED")
    assert [e.split()[1] for e in effects(tmp_path) if e.startswith("event")] == ["create", "delete"]
    record = verified_record(tmp_path)
    undos = [(i, e["evidence"]["outcome"]) for i, e in enumerate(record["events"]) if e["event"] == "compensate"]
    recovered = next(i for i, e in enumerate(record["events"]) if e["event"] == "coordinator.recovered")
    assert [o for _i, o in undos] == ["in-doubt", "ok"] and undos[0][0] < recovered < undos[1][0]


def verified_record(workdir: Path) -> dict[str, Any]:
    """The record the child wrote, once it verifies against the child's keyring."""
    record: dict[str, Any] = json.loads((workdir / "record.json").read_text())
    ring = Keyring.from_jwks(json.loads((workdir / "keyring.json").read_text()))
    assert verify_record(record, ring) == []
    return record


def answered(workdir: Path) -> TxnStatus:
    """What the killed coordinator's log answers an agent now (hatp/txn/status reads only the log)."""

    async def read() -> TxnStatus:
        log = SqliteTxnLog(workdir / "txn.db")
        try:
            logged = await log.load(TXN)
        finally:
            log.close()
        assert logged is not None
        return summarize(Plan.model_validate(logged.plan), logged.events, logged.decision)

    return anyio.run(read)


@pytest.mark.e2e
def test_a_sigkill_after_the_outcome_was_answered_never_contradicts_it_HATP_TXN_26(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline"
    baseline.mkdir()
    lines = finish(Child(CHILD, baseline, "run"))
    said = [line.split(" ", 2)[2] for line in lines if line.startswith("STEP ")]
    told_at = said.index("pay answered its commit") + 2  # the write after the payment's answer tells the outcome
    for pause_at in range(told_at, len(said)):  # killed after the answer, before (or while) the holds commit
        workdir = tmp_path / f"kill-{pause_at}"
        workdir.mkdir()
        child = Child(CHILD, workdir, "run", pause_at)
        killed(child)
        status = answered(workdir)
        assert (status.outcome, status.closed) == ("COMMITTED", False) and status.confirming, status
        replacement = finish(Child(CHILD, workdir, "recover"))
        outcome = next(line.split()[1] for line in replacement if line.startswith("DONE"))
        assert outcome == status.outcome  # the answer stands: recovery completes COMMITTED
        check_all_or_nothing(workdir, outcome)
        record = verified_record(workdir)
        assert [e["event"] for e in record["events"]].count("outcome.decided") == 1  # told once

"""Kill the journal's process (SIGKILL) at every durable point of a saga and of its rollback: each journal append
and each effect the shop made before the journal wrote its result. Restart, and check: no completed step left
un-undone, no undo made twice, every undo call with its step's undo key, the record verifies (HATP-JRN-10,
HATP-JRN-2, HATP-JRN-7, HATP-JRN-9). On both stores: SQLite, and PostgreSQL (one database on the session's
throwaway cluster, each run's saga under its own id), whose server outlives the killed process as a shared
database would."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from hatp_mcp.core.journal.record import verify_journal
from hatp_mcp.core.signing.keys import Keyring
from tests.crash.child_process import Child, finish, killed
from tests.postgres_cluster import Cluster

CHILD = Path(__file__).with_name("journal_child.py")


def check(workdir: Path) -> None:
    """Everything that happened was undone once, by undo calls carrying the undo key, and the record holds."""
    log = workdir / "effects.log"
    effects = [tuple(line.split(" ", 1)) for line in log.read_text().splitlines()] if log.exists() else []
    calls_path = workdir / "effects.calls"
    calls = calls_path.read_text().splitlines() if calls_path.exists() else []
    assert len(effects) == len(set(effects)), f"an effect was made twice: {effects}"
    done = {(k, key) for k, key in effects if k in ("mark", "refund")}
    for kind, key in done:  # no completed step left un-undone (HATP-JRN-3)
        assert (f"un{kind}", f"{key}:undo") in effects, f"{kind} {key} was never undone: {effects}"
    undone = [(k, key) for k, key in effects if k.startswith("un")]
    assert len(undone) == len(done), f"an undo without its step: {effects}"
    order = [k for k, _ in effects]
    if "unrefund" in order and "unmark" in order:
        assert order.index("unrefund") < order.index("unmark")  # LIFO
    per_key = Counter(c.split(" ", 1)[1] for c in calls)
    assert all(key.endswith(":undo") for key in per_key), calls  # HATP-JRN-7
    assert all(n <= 2 for n in per_key.values()), f"an undo was sent more than once after one crash: {calls}"
    record = json.loads((workdir / "record.json").read_text())
    ring = Keyring.from_jwks(json.loads((workdir / "keyring.json").read_text()))
    assert verify_journal(record, ring) == []
    assert record["events"][-1]["body"]["status"] == "ROLLED_BACK"


def workdir_for(path: Path, database: str | None, saga_id: str | None = None) -> Path:
    """A fresh work dir; on PostgreSQL with the database in its store.url and its saga's own id in saga.id."""
    path.mkdir()
    if database is not None:
        (path / "store.url").write_text(database)
    if saga_id is not None:
        (path / "saga.id").write_text(saga_id)
    return path


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_journal_killed_at_every_durable_point_recovers_and_undoes_everything_once_HATP_JRN_10(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    postgres: Cluster | None = request.getfixturevalue("postgres") if backend == "postgresql" else None
    database = postgres.new_database() if postgres is not None else None
    baseline = workdir_for(tmp_path / "baseline", database)
    lines = finish(Child(CHILD, baseline, "run"))
    assert "DONE ROLLED_BACK" in lines
    said = [line.split(" ", 2)[2] for line in lines if line.startswith("STEP ")]
    assert said[:3] == ["journal append 1", "journal append 2", "shop did mark saga-crash-882:s1:1"], said
    assert "shop did unrefund saga-crash-882:s2:1:undo" in said and "shop did unmark saga-crash-882:s1:1:undo" in said
    check(baseline)
    calls = (baseline / "effects.calls").read_text().splitlines()
    assert calls == ["unrefund saga-crash-882:s2:1:undo", "unmark saga-crash-882:s1:1:undo"]  # once each
    steps = len(said)
    recovered: set[str] = set()
    seen: set[str] = set()  # what the recoveries had to do
    for pause_at in range(1, steps + 1):
        workdir = workdir_for(tmp_path / f"kill-{pause_at}", database, f"saga-crash-882-k{pause_at}")
        child = Child(CHILD, workdir, "run", pause_at)
        killed(child)  # dies with step pause_at on disk and nothing after it
        lines = finish(Child(CHILD, workdir, "recover"))
        recovered.update(line.split()[1] for line in lines if line.startswith("DONE"))
        check(workdir)
        record = json.loads((workdir / "record.json").read_text())
        names = [e["event"] for e in record["events"]]
        if pause_at < steps:
            assert "saga.recovered" in names, (pause_at, names)
        seen.update(n for n in names if n in ("lookup.happened", "lookup.absent"))
        calls_path = workdir / "effects.calls"
        calls = calls_path.read_text().splitlines() if calls_path.exists() else []
        if len(calls) != len(set(calls)):
            seen.add("undo sent again with its key")
    assert recovered == {"ROLLED_BACK"}
    # the kill points cover a call out with no result (found, and not made) and an undo out with no answer
    assert seen == {"lookup.happened", "lookup.absent", "undo sent again with its key"}

"""`hatp evidence` (a participant's own answers, exported from its store) and `hatp verify --evidence` (the record
checked against them, spec/hatp.md HATP-REC-19..22): what each prints, and one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from demo.trip_world import AIRLINE, build_world, trip_plan
from hatp_mcp.cli import main
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.store.participant_state import SqliteParticipantStore
from tests.core.journal.test_record import RING, rolled_back_record
from tests.records import rechain
from tests.txn_helpers import drive

pytestmark = pytest.mark.anyio

TXN = "txn-evidence-1"


async def run_committed(tmp_path: Path, clock: FakeClock) -> tuple[Path, Path, dict[str, Any], Any]:
    """The trip committed by in-process participants whose state is SQLite (as a server's DATA/state.db):
    (the record file, the keyring file, the record, the world)."""
    world = build_world(clock, stores=lambda name: SqliteParticipantStore(tmp_path / f"{name}.db"))
    result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now(), TXN)))
    record_path = tmp_path / "record.json"
    record_path.write_text(json.dumps(result.record))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(world.keyring.to_jwks()))
    for p in world.participants.values():
        p.store.close()
    return record_path, keys, result.record, world


def export(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["evidence", "--store", f"sqlite:{tmp_path / f'{name}.db'}", "--txn", TXN]) == 0
    path = tmp_path / f"{name}.evidence.json"
    path.write_text(capsys.readouterr().out)
    return path


async def test_HATP_REC_19_hatp_evidence_exports_a_participants_own_signed_answers(
    tmp_path: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, record, _ = await run_committed(tmp_path, clock)
    doc = json.loads(export(tmp_path, "airline", capsys).read_text())
    assert doc["type"] == "hatp.evidence" and doc["txnId"] == TXN
    recorded = [e["evidence"] for e in record["events"] if e["author"] == AIRLINE and "evidence" in e]
    assert doc["evidence"] == recorded  # exactly as signed: vote, prepare receipt, commit receipt
    assert main(["evidence", "--store", f"sqlite:{tmp_path / 'airline.db'}", "--txn", "txn-unknown"]) == 0
    assert json.loads(capsys.readouterr().out)["evidence"] == []  # a transaction it never saw: nothing


async def test_HATP_REC_22_verify_says_what_the_parties_evidence_covered(
    tmp_path: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    record_path, keys, _, _ = await run_committed(tmp_path, clock)
    airline = export(tmp_path, "airline", capsys)
    assert main(["verify", str(record_path), "--keys", str(keys)]) == 0
    out = capsys.readouterr().out
    assert "12 head(s) the parties signed inside the record agree with it; not checked against the parties' own " in out
    assert main(["verify", str(record_path), "--keys", str(keys), "--evidence", str(airline)]) == 0
    out = capsys.readouterr().out
    assert "3 outside answer(s) from mcp://airline.example/hatp checked against the record (3 with a head)" in out
    assert main(["verify", str(record_path), "--keys", str(keys), "--evidence", str(airline), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["anchoring"] == "checked"
    want = {"insideHeads": 12, "outside": 3, "outsideHeads": 3, "pinnedTo": 12, "beyond": 0, "unrecorded": 0}
    assert found["anchors"] == want


async def test_HATP_REC_21_verify_with_a_participants_export_refuses_the_record_cut_and_re_signed(
    tmp_path: Path, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    _, keys, record, world = await run_committed(tmp_path, clock)
    hotel = export(tmp_path, "hotel", capsys)
    begin = record["events"][0]
    at, author = begin["at"], begin["author"]
    cut = [
        begin,
        {"event": "abort.requested", "at": at, "author": author, "body": {"reason": "changed its mind"}},
        {"event": "decision", "at": at, "author": author, "body": {"decision": "abort", "reason": "asked"}},
        {"event": "record.closed", "at": at, "author": author, "body": {"outcome": "ABORTED"}},
    ]
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(rechain(record, cut, world.keys["coordinator"])))
    assert main(["verify", str(forged), "--keys", str(keys), "--json"]) == 0  # alone it holds (HATP-REC-6) ...
    assert json.loads(capsys.readouterr().out)["anchoring"] == "none"  # ... and says it is not anchored
    assert main(["verify", str(forged), "--keys", str(keys), "--evidence", str(hotel)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all(line.startswith("✗ HATP-REC-21  ") for line in lines)
    assert (
        "mcp://hotel.example/hatp's commit receipt (ok) for room was signed at head 12, but this record ends at "
        "event 3: the record was cut after the party answered" in lines[2]
    )


def test_bad_evidence_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.db"
    assert main(["evidence", "--store", f"sqlite:{missing}", "--txn", TXN]) == 2
    assert capsys.readouterr().err == f"hatp: sqlite:{missing}: no such participant store\n"
    assert not missing.exists()  # never creates an empty store to export from
    assert main(["evidence", "--store", "mysql://x", "--txn", TXN]) == 2
    assert "give sqlite:PATH" in capsys.readouterr().err
    record = tmp_path / "journal.json"
    record.write_text(json.dumps(rolled_back_record()))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(RING.to_jwks()))
    not_evidence = tmp_path / "x.json"
    not_evidence.write_text('{"a": 1}')
    assert main(["verify", str(record), "--keys", str(keys), "--evidence", str(not_evidence)]) == 2
    assert "outside evidence is `hatp evidence`'s export (hatp.evidence)" in capsys.readouterr().err
    answers = tmp_path / "answers.json"
    answers.write_text("[]")
    assert main(["verify", str(record), "--keys", str(keys), "--evidence", str(answers)]) == 0  # nothing given
    capsys.readouterr()
    answers.write_text(json.dumps([{"type": "hatp.receipt"}]))
    assert main(["verify", str(record), "--keys", str(keys), "--evidence", str(answers)]) == 2
    assert "--evidence checks a Transaction Record" in capsys.readouterr().err  # never ignored silently

"""Record anchoring through real processes (spec/hatp.md HATP-REC-19..22): the trip run by the seven server
processes of `make demo-mcp`; each participant's own signed answers exported from its store with `hatp evidence`;
the committed record cut back to an abort and signed again with the coordinator's own key, which `hatp verify`
alone accepts (and calls not anchored) and `hatp verify --evidence` refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from demo.trip_mcp import run_trip
from hatp_mcp.core.signing.keys import SigningKey
from tests.records import rechain

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

PARTICIPANTS = ("airline", "hotel", "calendar", "payments")


def hatp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hatp_mcp.cli", *args], capture_output=True, text=True, timeout=60, check=False
    )


def verify(record: Path, data: Path, *evidence: Path, text: bool = False) -> tuple[int, Any]:
    flags = [arg for path in evidence for arg in ("--evidence", str(path))]
    done = hatp("verify", str(record), "--keys", str(data / "keyring.json"), *flags, *([] if text else ["--json"]))
    assert done.stderr == "", done.stderr
    return done.returncode, done.stdout if text else json.loads(done.stdout)


async def test_HATP_REC_21_a_cut_and_re_signed_record_is_refused_with_the_participants_exported_receipts(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(180):
        outcomes = await run_trip(tmp_path, out=lambda _line: None)
    txn = next(t for t, outcome in outcomes.items() if outcome == "COMMITTED")
    record_path = tmp_path / f"{txn}.record.json"
    exports = []
    for name in PARTICIPANTS:  # HATP-REC-19: each participant exports what it signed, from its own store
        done = hatp("evidence", "--store", f"sqlite:{tmp_path / name / 'state.db'}", "--txn", txn)
        assert done.returncode == 0, done.stderr
        export = json.loads(done.stdout)
        assert export["type"] == "hatp.evidence" and export["txnId"] == txn
        assert [e.get("phase", "vote") for e in export["evidence"]] == ["vote", "prepare", "commit"]
        assert all("recordHead" in e for e in export["evidence"])
        path = tmp_path / f"{name}.evidence.json"
        path.write_text(done.stdout)
        exports.append(path)

    code, found = verify(record_path, tmp_path, *exports)
    assert code == 0, found
    assert found["anchoring"] == "checked"
    assert found["anchors"]["outside"] == 12 and found["anchors"]["outsideHeads"] == 12
    record = json.loads(record_path.read_text())
    decision = next(i for i, e in enumerate(record["events"]) if e["event"] == "decision")
    assert found["anchors"]["pinnedTo"] == decision
    code, said = verify(record_path, tmp_path, *exports, text=True)
    assert code == 0 and "12 outside answer(s) from" in said and f"their heads pin events 0..{decision}" in said

    # the planted violation: cut back to txn.begin, an abort appended, decided and closed, re-signed
    key = SigningKey.from_jwk(json.loads((tmp_path / "coordinator" / "key.jwk.json").read_text()))
    begin = record["events"][0]
    at, author = begin["at"], begin["author"]
    forged = rechain(
        record,
        [
            begin,
            {"event": "abort.requested", "at": at, "author": author, "body": {"reason": "changed its mind"}},
            {"event": "decision", "at": at, "author": author, "body": {"decision": "abort", "reason": "asked"}},
            {"event": "record.closed", "at": at, "author": author, "body": {"outcome": "ABORTED"}},
        ],
        key,
    )
    forged_path = tmp_path / "forged.record.json"
    forged_path.write_text(json.dumps(forged))
    code, alone = verify(forged_path, tmp_path)
    assert code == 0 and alone["outcome"] == "ABORTED" and alone["anchoring"] == "none"  # HATP-REC-6, said so
    code, said = verify(forged_path, tmp_path, text=True)
    assert "not anchored: no party signed a head of this record" in said
    code, found = verify(forged_path, tmp_path, *exports)
    assert code == 1
    assert {p["rule"] for p in found["problems"]} == {"HATP-REC-21"}
    cut = [p for p in found["problems"] if "the record was cut after the party answered" in p["reason"]]
    assert len(cut) == 4 and all("commit receipt (ok)" in p["reason"] for p in cut)
    assert all(f"was signed at head {decision}, but this record ends at event 3" in p["reason"] for p in cut)

"""`hatp verify` on a saga's journal record (HATP-JRN-12): the same command, the same exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from tests.core.journal.test_record import RING, rolled_back_record


def test_verify_checks_a_journal_record_offline_HATP_JRN_12(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = rolled_back_record()
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(RING.to_jwks()))
    good = tmp_path / "journal.json"
    good.write_text(json.dumps(record))
    assert main(["verify", str(good), "--keys", str(keys)]) == 0
    out = capsys.readouterr().out
    assert "journal record saga-7 holds" in out and "ROLLED_BACK" in out
    record["events"][1]["body"]["args"] = {"item": "883"}
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(record))
    assert main(["verify", str(bad), "--keys", str(keys), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and {"index": 1, "rule": "HATP-SIG-4"}.items() <= report["problems"][0].items()

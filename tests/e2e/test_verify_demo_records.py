"""`hatp verify --org` as a process, on the records a real `make demo-mcp` run produced: both verify and say what
they prove; the same records tampered with the coordinator's own key (so chain and signatures stay valid) are
refused with the outcome rule that catches each (HATP-REC-11, HATP-REC-12)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from demo.trip_mcp import run_trip
from demo.trip_suite import ORG
from hatp_mcp.core.signing.keys import SigningKey
from tests.records import about, keep, rechain

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def verify(record: Path, data: Path) -> tuple[int, dict[str, Any]]:
    cmd = [sys.executable, "-m", "hatp_mcp.cli", "verify", str(record), "--keys", str(data / "keyring.json")]
    done = subprocess.run(
        [*cmd, "--org", str(ORG), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, json.loads(done.stdout)


def text(record: Path, data: Path) -> str:
    cmd = [sys.executable, "-m", "hatp_mcp.cli", "verify", str(record), "--keys", str(data / "keyring.json")]
    done = subprocess.run([*cmd, "--org", str(ORG)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def test_demo_records_prove_their_outcomes_and_tampered_copies_are_refused(tmp_path: Path) -> None:
    with anyio.fail_after(180):
        outcomes = await run_trip(tmp_path, out=lambda _line: None)
    by_outcome = {outcome: tmp_path / f"{txn}.record.json" for txn, outcome in outcomes.items()}
    committed_path, aborted_path = by_outcome["COMMITTED"], by_outcome["ABORTED"]
    out = text(committed_path, tmp_path)
    assert "outcome COMMITTED is justified by the record: every branch voted yes" in out
    assert "1 human decision(s), each carrying its person's valid proof" in out
    out = text(aborted_path, tmp_path)
    assert "outcome ABORTED is justified by the record: aborted because room voted no (UNAVAILABLE)" in out
    assert "no human decisions in this record" in out  # never "every human decision is proven" about none

    key = SigningKey.from_jwk(json.loads((tmp_path / "coordinator" / "key.jwk.json").read_text()))
    committed = json.loads(committed_path.read_text())
    aborted = json.loads(aborted_path.read_text())
    bare = rechain(committed, keep(committed, lambda e: e["event"] in ("txn.begin", "decision", "record.closed")), key)
    no_gateway = rechain(committed, keep(committed, lambda e: about(e) != "finance"), key)
    forged = []
    for e in aborted["events"]:
        if e["event"] == "decision":
            e = {**e, "body": {"decision": "commit", "reason": "every branch and every approver voted yes"}}
        if e["event"] == "record.closed":
            e = {**e, "body": {"outcome": "COMMITTED"}}
        if e["event"] not in ("abort", "approval.withdrawn"):
            forged.append(e)
    recommitted = rechain(aborted, forged, key)
    for name, record, rule in (
        ("bare", bare, "HATP-REC-11"),
        ("no-gateway", no_gateway, "HATP-REC-11"),
        ("recommitted", recommitted, "HATP-REC-12"),
    ):
        path = tmp_path / f"{name}.record.json"
        path.write_text(json.dumps(record))
        code, found = verify(path, tmp_path)
        assert code == 1, (name, found)
        assert rule in {p["rule"] for p in found["problems"]}, (name, found)
        assert not {p["rule"] for p in found["problems"]} & {"HATP-REC-1", "HATP-REC-2", "HATP-SIG-4"}, name

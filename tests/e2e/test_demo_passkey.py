"""`make demo-passkey` end to end: seven server processes, the approver approving in headless Chromium with a
passkey, the trip committed with the coordinator checking the assertion against the card (HATP-TXN-19,
HATP-GW-68), and `hatp verify --org` checking it offline: a flipped signature bit in the recorded assertion, or a
verifier without the organisation's relying party, fails verification (HATP-GW-68, HATP-GW-70)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from demo.passkey import run_demo
from hatp_mcp.core.gateway.passkey import b64u, unb64u

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


async def verify(data: Path, record: dict[str, Any], org: Path) -> tuple[int, dict[str, Any]]:
    path = data / "checked.record.json"
    path.write_text(json.dumps(record))
    cmd = [sys.executable, "-m", "hatp_mcp.cli", "verify", str(path), "--keys", str(data / "keyring.json")]
    done = await anyio.run_process([*cmd, "--org", str(org), "--json"], check=False)
    return done.returncode, json.loads(done.stdout.decode())


async def test_the_passkey_demo_commits_with_the_assertion_in_the_record_and_verify_org_checks_it(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    with anyio.fail_after(240):
        result = await run_demo(tmp_path, out=lines.append)
        record = result["record"]
        approval = next(e["evidence"] for e in record["events"] if e["event"] == "approval")
        (decision,) = approval["decisions"]
        tampered = json.loads(json.dumps(record))
        t_approval = next(e["evidence"] for e in tampered["events"] if e["event"] == "approval")
        sig = unb64u(t_approval["decisions"][0]["passkey"]["signature"])
        t_approval["decisions"][0]["passkey"]["signature"] = b64u(sig[:-1] + bytes([sig[-1] ^ 1]))
        flipped_rc, flipped = await verify(tmp_path, tampered, tmp_path / "org")
        (tmp_path / "org" / "gateway.json").write_text(json.dumps({"inboxUrl": "http://localhost:1"}))
        no_rp_rc, no_rp = await verify(tmp_path, record, tmp_path / "org")
    assert result["outcome"] == "COMMITTED" and result["rc"] == 0 and result["verified"]["humanProofs"] == "checked"
    assert decision["approver"] == result["who"] and decision["decision"] == "approve"
    assert "passkey" in decision and "proof" not in decision and decision["via"] == "inbox-passkey"
    assert all((result["shots"] / f"{n}.png").stat().st_size > 1000 for n in ("list", "ask", "decided", "timeline"))
    assert any(line.startswith("  the inbox says: Recorded: approve") for line in lines)
    assert flipped_rc == 1 and any("HATP-GW-68" in json.dumps(p) for p in flipped["problems"])
    assert no_rp_rc == 1 and any("HATP-GW-70" in json.dumps(p) for p in no_rp["problems"])

"""Durability across real processes: a gateway killed with asks pending is restarted, people decide in the
terminal inbox (another process) meanwhile, and the decision lands as a signed approval (HATP-GW-13)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.core.evidence import verify_raw
from hatp_mcp.core.model.base import format_ts
from tests.acme_org import ORG_DIR, h, keyring, plan

pytestmark = pytest.mark.e2e

HATP = str(Path(sys.executable).parent / "hatp")
KEY = str(ORG_DIR / "test-only-keys" / "gateway.private.jwk.json")


class Gateway:
    """One gateway process speaking JSON lines; every read is bounded."""

    def __init__(self, data: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hatp_mcp.runtime.gateway_stdio",
                "--data",
                str(data),
                "--org",
                str(ORG_DIR),
                "--key",
                KEY,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.read() == {"ready": True}

    def read(self, timeout: float = 30.0) -> Any:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "the gateway did not answer in time"
        return json.loads(self.proc.stdout.readline())

    def call(self, req: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def inbox(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HATP, "inbox", "--data", str(data), *args], capture_output=True, text=True, timeout=60)


def test_a_gateway_killed_with_an_ask_pending_restarts_and_the_inbox_decision_lands(tmp_path: Path) -> None:
    decide_by = format_ts((datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0))
    p = plan(decide_by=decide_by, txn_id="txn-restart-1")
    ask = {"op": "ask", "plan": p.wire(), "requirementId": "finance"}

    first = Gateway(tmp_path)
    pending = first.call(ask)
    assert pending["ok"] and pending["vote"]["decision"] == "pending" and pending["vote"]["decideBy"] == decide_by
    first.kill()  # no shutdown, no flush: only what was committed survives

    listed = inbox(tmp_path, "list")
    assert listed.returncode == 0 and "txn-restart-1/finance" in listed.stdout
    shown = inbox(tmp_path, "show", "txn-restart-1/finance")
    assert shown.returncode == 0 and "$25,000.00" in shown.stdout and "[agent-written]" in shown.stdout
    selfie = inbox(tmp_path, "approve", "txn-restart-1/finance", "--as", h("dana"))
    assert selfie.returncode == 1 and "HATP-GW-5" in selfie.stderr
    assert inbox(tmp_path, "approve", "txn-restart-1/finance", "--as", h("bob")).returncode == 0
    twice = inbox(tmp_path, "approve", "txn-restart-1/finance", "--as", h("bob"))
    assert twice.returncode == 1 and "HATP-GW-6" in twice.stderr

    second = Gateway(tmp_path)
    assert second.call(ask)["vote"] == pending["vote"]  # the same signed pending vote, not a new ask
    assert inbox(tmp_path, "approve", "txn-restart-1/finance", "--as", h("carol")).returncode == 0
    done = second.call({"op": "poll", "txnId": "txn-restart-1", "requirementId": "finance"})
    second.stop()
    assert done["ok"] and done["vote"]["decision"] == "yes"
    verify_raw(done["vote"], keyring(), role="gateway")
    verify_raw(done["approval"], keyring(), role="gateway")
    assert [d["approver"] for d in done["approval"]["decisions"]] == [h("bob"), h("carol")]
    assert done["approval"]["planDigest"] == p.digest()


def test_the_inbox_refuses_a_missing_data_dir_with_exit_2(tmp_path: Path) -> None:
    r = inbox(tmp_path, "list")
    assert r.returncode == 2 and "no gateway data" in r.stderr

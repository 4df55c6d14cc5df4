"""Durability across real processes: the MCP gateway server (servers/gateway.py) killed with SIGKILL while an ask
is pending is restarted on the same data dir; people decide in the terminal inbox (another process) meanwhile and
through the server's tools; the decision lands as a signed approval (HATP-GW-13, HATP-MCP-12)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.gateway.proof import check_decision_proofs, sign_decision
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.mcp.gateway_client import mcp_approver
from hatp_mcp.mcp.launch import launch_http, stdio_params
from hatp_mcp.runtime.clock import FakeClock, SystemClock
from tests.acme_org import GATEWAY_ID, ORG_DIR, h, human_key, human_keys, keyring, plan
from tests.coordinators import COORDINATOR, signer, trust_dirs

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

HATP = str(Path(sys.executable).parent / "hatp")
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def inbox(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HATP, "inbox", "--data", str(data), *args], capture_output=True, text=True, timeout=60)


def as_(name: str) -> list[str]:
    return ["--as", h(name), "--key", str(ORG_DIR / "test-only-keys" / "humans" / f"{name}.private.jwk.json")]


async def test_HATP_MCP_12_a_gateway_killed_with_an_ask_pending_restarts_and_the_inbox_decision_lands(
    tmp_path: Path,
) -> None:
    decide_by = format_ts((datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0))
    p = plan(decide_by=decide_by, txn_id="txn-restart-1")
    extra = ["--org", str(ORG_DIR)]
    trust_dirs([tmp_path])  # the gateway acts for the test coordinator (HATP-TRUST-10)
    clock = SystemClock()
    with anyio.fail_after(60):
        async with launch_http("servers.gateway", tmp_path, extra=extra) as first:
            async with Client(first.url) as client:
                pending = await mcp_approver(
                    client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
                ).ask(p, "finance")
            first.kill()  # SIGKILL: no shutdown, no flush; only what was committed survives
            await first.process.wait()

        listed = inbox(tmp_path, "list")
        shown = inbox(tmp_path, "show", "txn-restart-1/finance")
        selfie = inbox(tmp_path, "approve", "txn-restart-1/finance", *as_("dana"))
        bob = inbox(tmp_path, "approve", "txn-restart-1/finance", *as_("bob"))
        twice = inbox(tmp_path, "approve", "txn-restart-1/finance", *as_("bob"))

        async with launch_http("servers.gateway", tmp_path, extra=extra) as second:
            async with Client(second.url) as client:
                approver = mcp_approver(
                    client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
                )
                again = await approver.ask(p, "finance")
                carol = inbox(tmp_path, "approve", "txn-restart-1/finance", *as_("carol"))  # server running
                done = await approver.poll(p.txn_id, "finance")
    assert pending.vote["decision"] == "pending" and pending.vote["decideBy"] == decide_by
    assert listed.returncode == 0 and "txn-restart-1/finance" in listed.stdout
    assert shown.returncode == 0 and "$25,000.00" in shown.stdout and "[agent-written]" in shown.stdout
    assert selfie.returncode == 1 and "HATP-GW-5" in selfie.stderr
    assert bob.returncode == 0
    assert twice.returncode == 1 and "HATP-GW-6" in twice.stderr
    assert again.vote == pending.vote  # the same signed pending vote, not a new ask
    assert carol.returncode == 0
    assert done.vote["decision"] == "yes" and done.approval is not None
    verify_raw(done.vote, keyring(), role="gateway")
    verify_raw(done.approval, keyring(), role="gateway")
    assert [d["approver"] for d in done.approval["decisions"]] == [h("bob"), h("carol")]
    check_decision_proofs(Approval.model_validate(done.approval), human_keys())
    assert done.approval["planDigest"] == p.digest()


async def test_the_gateway_over_stdio_votes_and_people_decide_through_its_tools(tmp_path: Path) -> None:
    p = plan(txn_id="txn-stdio-1")
    params = stdio_params("servers.gateway", tmp_path, ["--org", str(ORG_DIR), "--now", "2026-11-29T10:00:00Z"])
    trust_dirs([tmp_path])
    clock = FakeClock(NOW)  # the gateway's pinned clock: the coordinator's auth is fresh at that time
    with anyio.fail_after(60):
        async with Client(params) as client:
            approver = mcp_approver(
                client, keyring(), coordinator=COORDINATOR, signer=signer(clock), gateway_id=GATEWAY_ID
            )
            pending = await approver.ask(p, "finance")
            for who in ("bob", "carol"):
                shown = json.loads(
                    (await client.call_tool("show_ask", {"ask_id": "txn-stdio-1/finance"})).content[0].text
                )  # type: ignore[union-attr]
                signed = sign_decision(
                    human_key(who), "txn-stdio-1/finance", shown["subjectDigest"], h(who), "approve", NOW, nonce=who * 8
                )
                r = await client.call_tool("decide", {"ask_id": "txn-stdio-1/finance", "proof": signed.wire()})
                assert not r.is_error
            done = await approver.poll(p.txn_id, "finance")
    assert pending.vote["decision"] == "pending" and done.vote["decision"] == "yes"
    assert done.approval is not None and [d["proof"]["human"] for d in done.approval["decisions"]] == [
        h("bob"),
        h("carol"),
    ]


def test_the_inbox_refuses_a_missing_data_dir_with_exit_2(tmp_path: Path) -> None:
    r = inbox(tmp_path, "list")
    assert r.returncode == 2 and "no gateway data" in r.stderr

"""Reaching the approver for real, across processes: the gateway process, configured by the organisation's
`gateway.json` with an SMTP server (aiosmtpd on loopback, in this test), emails the person it asks a notice with
the ceiling, the deadline and the link to the ask (HATP-GW-60, HATP-GW-66); they approve, and the trip commits with
the coordinator's poll an hour away (HATP-MCP-40)."""

from __future__ import annotations

import json
import shutil
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from demo.trip_mcp import plan_for
from demo.trip_suite import ORG, open_seven
from tests.acme_org import resigned
from tests.runtime.gateway.delivery.receivers import smtp_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def org_with_email(tmp: Path, smtp_port: int) -> Path:
    org = tmp / "org"
    shutil.copytree(ORG, org)
    for name in ("alice", "bob"):  # their cards, re-signed by the Directory, now list email first
        card = resigned(name, channels=[{"type": "email"}, {"type": "inbox"}])
        (org / "cards" / f"{name}.json").write_text(json.dumps(card))
    settings = {
        "inboxUrl": "http://localhost:8400",
        "channels": {"email": {"host": "127.0.0.1", "port": smtp_port, "from": "approvals@acme.example"}},
    }
    (org / "gateway.json").write_text(json.dumps(settings))
    return org


async def test_the_person_asked_gets_an_email_with_the_link_approves_and_the_trip_commits(tmp_path: Path) -> None:
    contacts = json.loads((ORG / "contacts.json").read_text())
    with anyio.fail_after(120):
        async with smtp_receiver() as box, AsyncExitStack() as stack:
            org = org_with_email(tmp_path, box.port)
            suite = await open_seven(
                stack,
                tmp_path / "data",
                extra={"gateway": ["--org", str(org)], "coordinator": ["--poll-seconds", "3600"]},
            )
            txn_id = "txn-email-0001"
            await suite.begin(plan_for(txn_id, datetime.now(UTC), "2026-12-10", "14C"))
            await suite.asked(txn_id)
            shown = await suite.tool("gateway", "show_ask", {"ask_id": f"{txn_id}/finance"})
            who = shown["waitingFor"][0]
            with anyio.fail_after(20):
                ((to, mail),) = await box.wait_for(1)
            _who, decided = await suite.human_decides(txn_id)
            with anyio.fail_after(30):
                done = await suite.outcome(txn_id)
    assert to == [contacts[who]["email"]]
    body = mail.get_payload(decode=True).decode()
    assert mail["Subject"].startswith("Approval needed: travel.spend")
    assert f"http://localhost:8400/asks/{txn_id}%2Ffinance" in body and "Decide by " in body and "up to" in body
    assert not any(a in body for book in contacts.values() for a in book.values())
    assert decided["state"] == "approved" and done["outcome"] == "COMMITTED"

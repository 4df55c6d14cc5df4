"""A holds-first trip over real processes (coordinator, gateway and the four tool servers over HTTP): the
coordinator places the holds, asks the gateway under their end times, the person sees them on the approval
screen and signs them, and the signed approval in the record carries them (HATP-MODE-7, HATP-GW-31/32)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from secrets import token_hex
from typing import Any

import anyio
import pytest

from demo.trip_suite import human_key_file
from hatp_mcp.core.gateway.proof import sign_decision
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.keys import SigningKey
from tests.e2e.coordinator_suite import Agent, problems, trip
from tests.e2e.test_coordinator_http import Suite

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


@pytest.fixture(scope="module")
async def suite(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Suite]:
    data = tmp_path_factory.mktemp("holds-first")
    async with AsyncExitStack() as stack:
        s = Suite(data, stack)
        await s.start_trip()
        yield s


def holds_first(txn_id: str) -> Plan:
    doc = trip(txn_id, "2026-12-12", "15A").wire()
    doc["mode"] = "holds-first"
    return Plan.model_validate(doc)


async def test_HATP_MODE_7_a_holds_first_approval_screen_shows_the_hold_end_times_and_the_signed_approval_carries_them(
    suite: Suite,
) -> None:
    txn = "txn-h-holds-first"
    with anyio.fail_after(90):
        async with suite.coordinator("coordinator") as proc, proc.client() as client:
            agent = Agent(client)
            await agent.begin(holds_first(txn))
            await agent.asked(txn)
            ask_id = f"{txn}/finance"
            shown: dict[str, Any] = await suite.tool("gateway", "show_ask", {"ask_id": ask_id})
            while "terms" not in shown:  # the tighten right after the ask: follow the coordinator until it landed
                await agent.status(txn, wait=5, after=(await agent.status(txn))["eventCount"])
                shown = await suite.tool("gateway", "show_ask", {"ask_id": ask_id})
            who = shown["waitingFor"][0]
            key = SigningKey.from_jwk(json.loads(human_key_file(who).read_text()))
            proof = sign_decision(
                key,
                ask_id,
                shown["subjectDigest"],
                who,
                "approve",
                datetime.now(UTC),
                nonce=token_hex(12),
                terms=shown["terms"],
            )
            await suite.tool("gateway", "decide", {"ask_id": ask_id, "proof": proof.wire()})
            done = await agent.outcome(txn)
    terms = shown["terms"]
    assert [h["branchId"] for h in terms["holds"]] == ["seat", "room"]
    for h in terms["holds"]:  # in words, from the gateway's clock (HATP-GW-96)
        assert f"hold {h['branchId']} placed: lease ends {when_words(h['leaseExpiresAt'])} (in " in shown["text"]
    assert f"decide by {when_words(terms['decideBy'])} (in " in shown["text"]
    assert (done["outcome"], done["state"]) == ("COMMITTED", "committed")
    record = done["record"]
    begin = next(e for e in record["events"] if e["event"] == "txn.begin")
    assert begin["body"]["mode"] == "holds-first"
    approval = next(e["evidence"] for e in record["events"] if e["event"] == "approval")
    assert approval["terms"] == terms and approval["decisions"][0]["proof"]["terms"] == terms
    receipts = {
        e["body"]["branchId"]: e["evidence"]
        for e in record["events"]
        if e["event"] == "receipt" and e["evidence"].get("phase") == "prepare"
    }
    for h in terms["holds"]:  # the end times the person signed are the participants' own signed ones
        assert (receipts[h["branchId"]]["leaseExpiresAt"], receipts[h["branchId"]]["holdHorizon"]) == (
            h["leaseExpiresAt"],
            h["holdHorizon"],
        )
    assert problems(record, suite.data) == []

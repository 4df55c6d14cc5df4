"""Approval-gated undos across real processes (HATP-JRN-15): the shop's `reverse_refund` is gated (`servers.shop
--gate-undo`), the journal (`servers.journal --gateway`) asks the Human Gateway (`servers.gateway`, HTTP) for
exactly that call as the travel-bot agent, and waits. The finance approvers learn of the ask by email (the
gateway's delivery, to a loopback SMTP server: the test's signal that the ask is open) and decide with their own
keys. Approved: the undo runs with the approval and the saga is ROLLED_BACK. Rejected: the undo never runs, the
step is ROLLBACK_FAILED and the journal's record and dead letter say why."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from demo.people import ORG, decide_as
from hatp_mcp.core.journal.record import verify_journal
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.mcp.launch import launch_http, stdio_params
from tests.acme_org import resigned
from tests.e2e.test_journal_server import Agent
from tests.runtime.gateway.delivery.receivers import Mailbox, smtp_receiver

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AGENT_KEY = ORG / "test-only-keys" / "agents" / "travel-bot.private.jwk.json"


def org_with_email(tmp: Path, smtp_port: int) -> Path:
    """The fixture org, with alice and bob (finance approvers) reached by email first."""
    org = tmp / "org"
    shutil.copytree(ORG, org)
    for name in ("alice", "bob"):  # bob is also a security lead: he gets the journal's alerts too
        card = resigned(name, channels=[{"type": "email"}, {"type": "inbox"}])
        (org / "cards" / f"{name}.json").write_text(json.dumps(card))
    settings = {
        "inboxUrl": "http://localhost:8400",
        "channels": {"email": {"host": "127.0.0.1", "port": smtp_port, "from": "approvals@acme.example"}},
    }
    (org / "gateway.json").write_text(json.dumps(settings))
    return org


@dataclass
class World:
    agent: Agent
    gateway: Client
    box: Mailbox
    data: Path
    journal_args: list[str]  # how the module's journal was started, less its gateway options
    gateway_args: list[str]

    async def next_ask(self, seen: int) -> str:
        """The id of the first ask the gateway emails about after the first `seen` messages (from its link)."""
        while True:
            for _to, mail in (await self.box.wait_for(seen + 1))[seen:]:
                seen += 1
                if str(mail["Subject"]).startswith("Approval needed"):
                    found = re.search(r"/asks/([A-Za-z0-9._%-]+)", mail.get_payload(decode=True).decode())
                    assert found, mail.get_payload()
                    return unquote(found.group(1))

    def alerts(self, saga_id: str) -> list[tuple[list[str], str]]:
        """The journal's dead-letter alerts about `saga_id`: (recipients, text)."""
        return [
            (to, mail.get_payload(decode=True).decode())
            for to, mail in self.box.messages
            if str(mail["Subject"]).startswith(f"Journal: undo needs a person ({saga_id} ")
        ]

    async def refund_then_roll_back(self, item: str, decisions: dict[str, str]) -> tuple[dict[str, Any], str]:
        """A saga that refunds `item`, rolled back while the approvers decide its gated undo; the rollback's answer
        and the ask's id."""
        saga = (await self.agent.j("saga_begin", {"name": f"refund-{item}"}))["sagaId"]
        undo = {"server": "shop", "tool": "reverse_refund", "arguments": {"item": item}}
        await self.agent.step(saga, f"refund #{item}", "refund", {"item": item, "usd": "40.00"}, undo)
        seen = len(self.box.messages)
        done: dict[str, Any] = {}
        ask_id = ""

        async def roll_back() -> None:
            done.update(await self.agent.j("saga_rollback", {"saga_id": saga, "reason": "the customer kept it"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(roll_back)
            ask_id = await self.next_ask(seen)  # the gateway emailed an approver: the ask is open
            for name, decision in decisions.items():
                await decide_as(self.gateway, ask_id, name, decision, org=self.data / "org")
        return done, ask_id


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    data = tmp_path_factory.mktemp("gated-undo")
    async with smtp_receiver() as box:
        org = org_with_email(data, box.port)
        async with (
            launch_http("servers.gateway", data / "gateway", extra=["--org", str(org)]) as gw,
            launch_http("servers.shop", data / "shop", extra=["--gate-undo", str(org)]) as shop_proc,
        ):
            allow = data / "allow.json"
            allow.write_text(json.dumps({"servers": {"shop": {"url": shop_proc.url, "tools": ["reverse_refund"]}}}))
            gated = ["--gateway", gw.url, "--agent-key", str(AGENT_KEY), "--org", str(org), "--approval-poll", "0.2"]
            alerting = [
                "--alert-to",
                "human://acme.com/role/security-leads",
                "--alert-link",
                "https://ops.acme.example",
            ]
            params = stdio_params("servers.journal", data / "journal", ["--allow", str(allow), *gated, *alerting])
            async with (
                Client(stdio_client(params)) as journal,
                Client(shop_proc.url) as shop,
                Client(gw.url) as gateway,
            ):
                yield World(Agent(journal, shop), gateway, box, data, ["--allow", str(allow)], gated)


def record_of(world: World, status: dict[str, Any]) -> list[dict[str, Any]]:
    ring = Keyring()
    ring.add(PublicKeyEntry.from_jwk(json.loads((world.data / "journal" / "public.jwk.json").read_text())))
    assert verify_journal(status["record"], ring) == []
    events: list[dict[str, Any]] = status["record"]["events"]
    return events


async def test_an_approved_gated_undo_runs_with_its_approval_and_the_saga_is_rolled_back_HATP_JRN_15(
    world: World,
) -> None:
    with anyio.fail_after(120):
        done, ask_id = await world.refund_then_roll_back("882", {"bob": "approve", "alice": "approve"})
        effects = await world.agent.effects()
        status = await world.agent.j("saga_status", {"saga_id": done["sagaId"], "include_record": True})
        shown = json.loads((await world.gateway.call_tool("show_ask", {"ask_id": ask_id})).content[0].text)  # type: ignore[union-attr]
    saga = done["sagaId"]
    assert done["status"] == "ROLLED_BACK" and [s["state"] for s in done["steps"]] == ["ROLLED_BACK"]
    assert [(e["kind"], e["key"]) for e in effects if e["item"] == "882"] == [
        ("refund", f"{saga}:s1:1"),
        ("unrefund", f"{saga}:s1:1:undo"),  # once, with the undo's key, after the approval
    ]
    # the people were asked about exactly that call, by the agent the journal's key stands for
    assert shown["state"] == "approved" and shown["ask"]["requester"] == "human://acme.com/dana"
    assert shown["ask"]["requirementId"] == "reverse_refund"
    names = [e["event"] for e in record_of(world, status)]
    assert names[-2:] == ["undo.done", "saga.closed"]


async def test_a_rejected_gated_undo_never_runs_and_leaves_the_step_rollback_failed_with_the_reason_HATP_JRN_15(
    world: World,
) -> None:
    with anyio.fail_after(120):
        done, ask_id = await world.refund_then_roll_back("883", {"bob": "reject"})
        effects = await world.agent.effects()
        status = await world.agent.j("saga_status", {"saga_id": done["sagaId"], "include_record": True})
    assert done["status"] == "ROLLBACK_FAILED" and [s["state"] for s in done["steps"]] == ["ROLLBACK_FAILED"]
    assert [e["kind"] for e in effects if e["item"] == "883"] == ["refund"]  # the undo never ran
    assert done["steps"][0]["undoAttempts"] == 1  # a refusal is final: not retried, nobody asked again
    (letter,) = done["deadLetters"]
    assert f"ask {ask_id}) ended rejected" in letter["error"] and "HATP-JRN-15" in letter["error"]
    gave_up = [e for e in record_of(world, status) if e["event"] == "undo.gave-up"]
    assert len(gave_up) == 1 and "ended rejected" in json.dumps(gave_up[0]["body"])
    # the dead letter went to the security leads the journal alerts (bob, by email: HATP-JRN-16)
    ((to, text),) = world.alerts(done["sagaId"])
    assert to == ["bob@mail.acme.example"] and "ended rejected" in text and "Tool: agent.step" in text
    assert "Its undo: tool reverse_refund on server shop" in text and "https://ops.acme.example" not in to


@asynccontextmanager
async def another_journal(world: World, name: str, args: list[str]) -> AsyncIterator[Agent]:
    params = stdio_params("servers.journal", world.data / name, [*world.journal_args, *args])
    async with Client(stdio_client(params)) as journal:
        yield Agent(journal, world.agent.shop)


async def test_a_gated_undo_nobody_decides_in_time_is_rollback_failed_and_never_runs_HATP_JRN_15(
    world: World,
) -> None:
    """A second journal on the same shop and gateway that waits one second for the people (its own clock)."""
    with anyio.fail_after(120):
        async with another_journal(world, "impatient", [*world.gateway_args, "--approval-wait", "1"]) as agent:
            saga = (await agent.j("saga_begin", {"name": "refund-884"}))["sagaId"]
            undo = {"server": "shop", "tool": "reverse_refund", "arguments": {"item": "884"}}
            await agent.step(saga, "refund #884", "refund", {"item": "884", "usd": "40.00"}, undo)
            done = await agent.j("saga_rollback", {"saga_id": saga})
            effects = await agent.effects()
    assert done["status"] == "ROLLBACK_FAILED" and done["steps"][0]["state"] == "ROLLBACK_FAILED"
    assert "no decision on the undo's approval" in done["deadLetters"][0]["error"]
    assert [e["kind"] for e in effects if e["item"] == "884"] == ["refund"]


async def test_a_gated_undo_on_a_journal_without_a_gateway_fails_at_once_HATP_JRN_15(world: World) -> None:
    with anyio.fail_after(120):
        async with another_journal(world, "ungated", []) as agent:
            saga = (await agent.j("saga_begin", {"name": "refund-885"}))["sagaId"]
            undo = {"server": "shop", "tool": "reverse_refund", "arguments": {"item": "885"}}
            await agent.step(saga, "refund #885", "refund", {"item": "885", "usd": "40.00"}, undo)
            done = await agent.j("saga_rollback", {"saga_id": saga})
            effects = await agent.effects()
    assert done["status"] == "ROLLBACK_FAILED" and done["steps"][0]["undoAttempts"] == 1
    assert "requires a human approval and this journal has no gateway" in done["deadLetters"][0]["error"]
    assert [e["kind"] for e in effects if e["item"] == "885"] == ["refund"]

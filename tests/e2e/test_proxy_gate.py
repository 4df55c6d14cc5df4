"""The proxy's gate and budgets (spec/proxy.md HATP-PXY-20..24) over real processes: the official npm
server-everything behind servers.journal_proxy with its `get-sum` tool gated (the amount is its argument `a`, in
USD), the Human Gateway (servers.gateway over HTTP, the TEST-ONLY acme.com organisation) and bob deciding with his
own key through the gateway's tools. The proxy asks as the travel-bot agent (its key on a Directory-signed agent
card) and says where the ask waits in its progress notifications, which is how this test learns the ask's id.

Approved: the call runs once. Rejected: refused with the reason, nothing upstream. The same approval presented
again (replayed), or for other arguments, or after it expired (the same proxy restarted with its clock pinned past
the expiry): refused by the gated-tool rules. Above the gate's maximum, or a budget the call would exceed: refused
before anyone is asked."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from demo.people import ORG, decide_as
from hatp_mcp.core.gated_tools.checks import APPROVAL_META_KEY
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.mcp.launch import ROOT, launch_http, stdio_params
from tests.e2e.test_proxy_npm_servers import server, text

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

AGENT_KEY = ORG / "test-only-keys" / "agents" / "travel-bot.private.jwk.json"
SERVER_ID = "mcp://everything.example"


def gated_policy(budget: str = "30") -> dict[str, Any]:
    return {
        "upstream": {"command": "node", "args": [server("server-everything")]},
        "default": "hide",
        "tools": {
            "echo": {"policy": "pass"},
            "get-sum": {
                "policy": "gate",
                "gate": {
                    "address": "human://acme.com/bob",
                    "action": "travel.spend",
                    "amount": "args.a",
                    "currency": "USD",
                    "max": "1000",
                },
            },
        },
        "budgets": [{"currency": "USD", "limit": budget, "windowSeconds": 86400}],
    }


INBOX = "https://approvals.acme.example"


def org_with_inbox(tmp: Path) -> Path:
    """The fixture org with its inbox's address (gateway.json), which the proxy links each ask to."""
    org = tmp / "org"
    if not org.exists():
        shutil.copytree(ORG, org)
        (org / "gateway.json").write_text(json.dumps({"inboxUrl": INBOX}))
    return org


@asynccontextmanager
async def gated_proxy(tmp: Path, name: str, extra: list[str]) -> AsyncIterator[Client]:
    path = tmp / f"{name}.policy.json"
    path.write_text(json.dumps(gated_policy()))
    args = ["--policy", str(path), "--org", str(org_with_inbox(tmp)), "--server-id", SERVER_ID, *extra]
    async with Client(stdio_client(stdio_params("servers.journal_proxy", tmp / name, args))) as client:
        yield client


@dataclass
class Asked:
    result: Any
    progress: list[str]
    ask_id: str


async def call_and_decide(proxy: Client, gateway: Client, args: dict[str, Any], decision: str | None) -> Asked:
    """Call get-sum through the proxy; once its progress names the ask, bob decides it (None: nobody decides)."""
    progress: list[str] = []
    opened = anyio.Event()
    out: dict[str, Any] = {}

    async def on_progress(_done: float, _total: float | None, message: str | None) -> None:
        progress.append(message or "")
        opened.set()

    async def run() -> None:
        out["result"] = await proxy.call_tool("get-sum", args, progress_callback=on_progress)
        opened.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await opened.wait()
        found = re.search(r"\(ask (toolcall\.[0-9a-f.]+)\)", progress[0]) if progress else None
        if found is not None and decision is not None:
            await decide_as(gateway, found.group(1), "bob", decision)
    return Asked(out["result"], progress, found.group(1) if found else "")


def refusal(result: Any) -> dict[str, Any]:
    assert result.is_error, text(result)
    found: dict[str, Any] = result.structured_content["refusal"]
    return found


async def test_HATP_PXY_21_a_gated_npm_tool_runs_once_approved_and_never_when_rejected_replayed_changed_or_expired(
    tmp_path: Path,
) -> None:
    ask_args = ["--gateway", "", "--agent-key", str(AGENT_KEY), "--approval-poll", "0.1", "--approval-wait", "60"]
    with anyio.fail_after(150):
        async with launch_http("servers.gateway", tmp_path / "gateway", extra=["--org", str(ORG)]) as gw:
            ask_args[1] = gw.url
            async with Client(gw.url) as gateway, gated_proxy(tmp_path, "proxy", ask_args) as proxy:
                listed = {t.name: t for t in (await proxy.list_tools()).tools}
                approved = await call_and_decide(proxy, gateway, {"a": 5, "b": 7}, "approve")
                status = json.loads(
                    (await gateway.call_tool("approval_status", {"ask_id": approved.ask_id})).content[0].text
                )
                approval = status["approval"]
                rejected = await call_and_decide(proxy, gateway, {"a": 6, "b": 1}, "reject")
                replayed = await proxy.call_tool("get-sum", {"a": 5, "b": 7}, meta={APPROVAL_META_KEY: approval})  # type: ignore[arg-type]
                changed = await proxy.call_tool("get-sum", {"a": 5, "b": 8}, meta={APPROVAL_META_KEY: approval})  # type: ignore[arg-type]
                asks_before = json.loads((await gateway.call_tool("list_asks", {})).content[0].text)["asks"]
                over_budget = await proxy.call_tool("get-sum", {"a": 26, "b": 0})
                over_max = await proxy.call_tool("get-sum", {"a": 1001, "b": 0})
                asks_after = json.loads((await gateway.call_tool("list_asks", {})).content[0].text)["asks"]
            later = format_ts(parse_ts(approval["expiresAt"]) + timedelta(seconds=1))
            async with gated_proxy(
                tmp_path, "proxy", ["--now", later, "--agent-key", str(AGENT_KEY)]
            ) as late:  # restarted, its clock later
                expired = await late.call_tool("get-sum", {"a": 5, "b": 7}, meta={APPROVAL_META_KEY: approval})  # type: ignore[arg-type]
                over_budget_after_restart = await late.call_tool("get-sum", {"a": 26, "b": 0})
    # listed with its gate said; approved: ran once, the upstream's answer and where it was approved
    assert "human approval" in (listed["get-sum"].description or "")
    assert not approved.result.is_error, text(approved.result)
    assert "The sum of 5 and 7 is 12." in text(approved.result) and approved.ask_id in text(approved.result)
    link = f"{INBOX}/asks/{approved.ask_id}"
    assert approved.ask_id and link in approved.progress[0] and link in text(approved.result)
    # who must act and by when, in words (HATP-GW-96)
    assert re.search(r"from Bob Brown, [^(]*\(human://acme\.com/bob\), decide by .* UTC \(in \d+", approved.progress[0])
    assert approval["toolCall"]["maxAmount"] == {"value": "5", "currency": "USD"}
    # rejected: refused with the reason (who rejected), nothing upstream
    assert refusal(rejected.result)["code"] == "APPROVAL_REJECTED"
    assert "rejected by Bob Brown (human://acme.com/bob)" in refusal(rejected.result)["reason"]  # HATP-GW-93
    assert "The sum of" not in text(rejected.result) and "nothing was sent upstream" in text(rejected.result)
    # the approval again: spent (single use); for other arguments: not this call
    assert refusal(replayed)["rule"] == "HATP-GATE-18"
    assert refusal(changed)["rule"] == "HATP-GATE-7"
    # expired, by the clock of a proxy past its expiresAt
    assert refusal(expired)["rule"] == "HATP-GATE-10"
    # 5 USD spent of the 30; the rejected 6 released: 26 more exceeds it, refused before anyone is asked
    assert refusal(over_budget)["rule"] == "HATP-PXY-23" and "spent 5 USD" in refusal(over_budget)["reason"]
    assert refusal(over_max)["rule"] == "HATP-PXY-22"
    # the spend is durable: the restarted proxy still counts it
    assert refusal(over_budget_after_restart)["rule"] == "HATP-PXY-23"
    assert asks_after == asks_before


def start_refusal(tmp: Path, policy: dict[str, Any]) -> tuple[int, str]:
    """How the proxy ends when started with `policy` and no organisation: its exit status and stderr."""
    path = tmp / "policy.json"
    path.write_text(json.dumps(policy))
    argv = ["-m", "servers.journal_proxy", "--transport", "stdio", "--data", str(tmp / "p"), "--policy", str(path)]
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stderr


def test_HATP_PXY_20_a_gated_tool_without_an_organisation_is_refused_at_start(tmp_path: Path) -> None:
    status, err = start_refusal(tmp_path, {**gated_policy(), "budgets": []})
    assert status == 2 and "HATP-PXY-20" in err and "gated but the proxy has no organisation" in err


def test_HATP_PXY_23_budgets_without_an_organisation_are_refused_at_start(tmp_path: Path) -> None:
    status, err = start_refusal(tmp_path, gated_policy())
    assert status == 2 and "HATP-PXY-23" in err and "budgets" in err

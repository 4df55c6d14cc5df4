"""An organisation's Claude Desktop block as real processes: the README's "From Claude Desktop" walkthrough, its
commands run exactly as written (`hatp init-org`, `hatp card`, `hatp mcp-config --org`, `hatp enrol`), then the
servers exactly as the block names them, started over stdio by this test as Claude Desktop would start them.

- Starting the whole block twice changes no key or pin file (bytes and mtimes), and it runs one gateway process,
  which the coordinator reaches over loopback HTTP (HATP-MCP-34, HATP-MCP-35).
- With the organisation's gateway settings sending email to an SMTP server on loopback (aiosmtpd), a trip that
  needs approval emails the approver a link to the inbox; the approver, who enrolled their passkey as the README
  says (`hatp enrol code`, the inbox's registration, `hatp enrol approve`), signs in and approves there with it
  (the software authenticator over HTTP); the trip commits, the decision reaching the coordinator by the long poll
  with `--poll-seconds 300` (HATP-MCP-40)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from hatp_mcp.cli.mcp_config_cmd import direct_config
from hatp_mcp.cli.org_layout import OrgLayout, load_suite
from hatp_mcp.core.gateway.passkey import unb64u
from hatp_mcp.mcp.call import call_raw
from tests.e2e.coordinator_suite import child_pids
from tests.passkey_authenticator import SoftAuthenticator
from tests.readme_walkthrough import commands, run
from tests.runtime.gateway.delivery.receivers import smtp_receiver
from tests.web.browserless import Browserless

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

# Claude Desktop starts them all at once; the gateway first here, so a plan's first ask finds it up (one begun
# while no gateway runs is aborted with APPROVER_FAILED)
ORDER = ("hatp-gateway", "hatp-directory", "hatp-coordinator")


SETUP, ENROL, _TERMINAL, *_WRAPPING = commands()  # the README's walkthrough, run exactly as written


async def make_org(home: Path) -> OrgLayout:
    """The walkthrough's organisation (Ann asks, the agent Claude acts for her, Ben approves travel up to $5,000)
    and its Claude Desktop block, by the README's own commands."""
    for command in SETUP:
        await run(command, home)
    return OrgLayout(home / "hatp-example")


def block(layout: OrgLayout) -> dict[str, Any]:
    """The block whose servers the client starts itself (`hatp mcp-config --org DIR --direct`); the walkthrough's
    own block (the service's bridges) is run by tests/e2e/test_service_processes.py."""
    bridges = json.loads((layout.root / "claude-desktop.json").read_text())["mcpServers"]
    assert all(e["args"][2] == "connect" for e in bridges.values())  # the walkthrough pastes the bridges
    servers: dict[str, Any] = direct_config(layout.root, sys.executable)["mcpServers"]
    return servers


def key_files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every key, pin and trust file under the organisation, with its bytes and mtime."""
    names = ("*.jwk.json", "*.jwks.json", "trusted-coordinators.json", "human-card.json")
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for n in names for p in root.rglob(n)}


@asynccontextmanager
async def started(
    servers: dict[str, Any], logs: Path, extra: dict[str, list[str]] | None = None
) -> AsyncIterator[dict[str, Client]]:
    """Each entry of the block as a stdio server, started as Claude Desktop starts it (command and args only)."""
    async with AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        for name in (n for n in ORDER if n in servers):
            entry = servers[name]
            assert set(entry) == {"command", "args"}  # no cwd, no PYTHONPATH: the installed package
            args = [*entry["args"], *(extra or {}).get(name, [])]
            params = StdioServerParameters(command=entry["command"], args=args)
            errlog = stack.enter_context((logs / f"{name}.stderr").open("a"))
            clients[name] = await stack.enter_async_context(Client(stdio_client(params, errlog=errlog)))
        yield clients


def gateway_processes() -> list[int]:
    """Every servers.gateway process below this test process (children and their children)."""
    found, frontier = [], [os.getpid()]
    while frontier:
        parent = frontier.pop()
        for pid in child_pids(parent, ""):
            frontier.append(pid)
            if "servers.gateway" in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                found.append(pid)
    return found


async def test_HATP_MCP_35_the_org_block_runs_one_gateway_and_starting_it_twice_changes_no_key_file(
    tmp_path: Path,
) -> None:
    layout = await make_org(tmp_path)
    servers = block(layout)
    suite = load_suite(layout.root)
    (tmp_path / "logs").mkdir()
    gateways = [n for n, e in servers.items() if "servers.gateway" in " ".join(e["args"])]
    assert gateways == ["hatp-gateway"]  # the coordinator starts no gateway of its own
    args = servers["hatp-coordinator"]["args"]
    assert args[args.index("--gateway") + 1] == f"http://127.0.0.1:{suite.gateway_mcp_port}/mcp"
    assert "test-only" not in json.dumps(servers) and "acme.com" not in json.dumps(servers)
    before = key_files(layout.root)
    for _round in range(2):
        with anyio.fail_after(120):
            async with started(servers, tmp_path / "logs") as clients:
                tools = {t.name for t in (await clients["hatp-coordinator"].list_tools()).tools}
                async with Client(f"http://127.0.0.1:{suite.gateway_mcp_port}/mcp") as coordinator_link:
                    linked = {t.name for t in (await coordinator_link.list_tools()).tools}
                direct = {t.name for t in (await clients["hatp-gateway"].list_tools()).tools}
                assert len(gateway_processes()) == 1
        assert "begin_transaction" in tools and "list_asks" in direct and linked == direct
        assert "request_approval" not in direct and "decide" not in direct  # the chat app cannot sign (HATP-MCP-57)
        assert key_files(layout.root) == before  # the same bytes and mtimes: nothing rewritten at start
    assert not (layout.data("gateway") / "key.jwk.json").exists()  # it signs with the organisation's gateway key


async def enrol(home: Path, passkey: SoftAuthenticator, gateway: dict[str, Any], logs: Path) -> None:
    """The walkthrough's enrolment, by its commands: the operator issues a code, the person registers their passkey
    in the web inbox (the software authenticator over HTTP, where a person uses their browser), the operator lists
    and approves it onto the card (the Directory re-signs it); the gateway reads the card at its next start."""
    issue, listing, approve = ENROL
    link = (await run(issue, home)).strip()
    inbox, _sep, code = link.partition("/enrol?code=")
    async with started({"hatp-gateway": gateway}, logs):
        browser = Browserless(inbox)
        await browser.get(f"/enrol?code={code}")
        _s, options = await browser.post("/enrol/options", {"code": code})
        credential = passkey.registration_json(unb64u(options["publicKey"]["challenge"]), origin=inbox)
        status, registered = await browser.post(
            "/enrol/register", {"nonce": options["nonce"], "credential": credential}
        )
    assert (status, registered["state"], registered["human"]) == (200, "pending", passkey.human)
    [pending] = json.loads(await run(listing, home))
    assert (pending["seq"], pending["state"], pending["credential_id"]) == (1, "pending", passkey.credential_id)
    assert f"lists passkey {passkey.credential_id}" in await run(approve, home)  # `approve 1`, as written


async def test_HATP_MCP_40_the_approver_is_emailed_a_link_approves_in_the_inbox_and_the_long_poll_commits_at_once(
    tmp_path: Path,
) -> None:
    layout = await make_org(tmp_path)
    ben = SoftAuthenticator("human://example.org/ben")
    suite = load_suite(layout.root)
    (tmp_path / "logs").mkdir()
    inbox = f"http://localhost:{suite.inbox_port}"
    async with smtp_receiver() as box:
        settings = json.loads(layout.gateway_settings.read_text())  # the operator adds the email channel
        settings["channels"]["email"] = {"host": "127.0.0.1", "port": box.port, "from": "approvals@example.org"}
        layout.gateway_settings.write_text(json.dumps(settings))
        servers = block(layout)
        with anyio.fail_after(60):
            await enrol(tmp_path, ben, servers["hatp-gateway"], tmp_path / "logs")
        extra = {"hatp-coordinator": ["--poll-seconds", "300"]}  # only the long poll can be this quick
        with anyio.fail_after(120):
            async with started(servers, tmp_path / "logs", extra) as clients:
                agent = clients["hatp-coordinator"]
                # as a model would: read the example plan (the organisation's own trip, fresh) and begin it
                (example,) = (await agent.read_resource("hatp://examples/trip-plan")).contents
                plan = json.loads(example.text)  # type: ignore[union-attr]
                txn_id, ask = plan["txnId"], f"{plan['txnId']}/finance"
                assert plan["requester"] == {
                    "principal": "human://example.org/ann",
                    "agent": "agent://example.org/claude",
                }
                began = await agent.call_tool("begin_transaction", {"plan": plan})
                assert not began.is_error, began.content
                with anyio.fail_after(30):
                    ((to, mail),) = await box.wait_for(1)
                body = mail.get_payload(decode=True).decode()
                with anyio.fail_after(30):  # what the model tells its user while Ben decides (HATP-MCP-54)
                    waiting: list[dict[str, Any]] = []
                    while not (waiting and waiting[0]["people"]):
                        seen = await agent.call_tool("transaction_status", {"txn_id": txn_id, "wait_seconds": 1})
                        assert seen.structured_content is not None, seen.content
                        waiting = seen.structured_content["waitingOn"]
                browser = Browserless(inbox)
                await browser.get("/")
                _s, options = await browser.post("/signin/options", {})
                signin = ben.credential_json(unb64u(options["challenge"]), origin=inbox)
                signed_in, who = await browser.post("/signin", {"nonce": options["nonce"], "credential": signin})
                await browser.get(f"/asks/{ask}")
                _s, challenge = await browser.post(f"/asks/{ask}/challenge", {"decision": "approve"})
                assertion = ben.credential_json(unb64u(challenge["challenge"]), origin=inbox)
                decided, result = await browser.post(
                    f"/asks/{ask}/decide", {"nonce": challenge["nonce"], "credential": assertion}
                )
                with anyio.fail_after(5):  # not the 300 s poll: the gateway's answer to the long poll
                    status = await call_raw(agent, "hatp/txn/status", {"txnId": txn_id, "waitSeconds": 60}, 70)
    assert to == ["ben@example.org"] and mail["Subject"].startswith("Approval needed: travel.spend")
    assert f"{inbox}/asks/{txn_id}%2Ffinance" in body and "up to" in body
    [(finance, by, words)] = [(w, w.pop("decideBy"), w.pop("decideByWords")) for w in waiting]
    assert finance == {
        "requirementId": "finance",
        "people": [{"displayName": "Ben Ng", "roles": ["finance-approver"]}],
        "link": f"{inbox}/asks/{txn_id}%2Ffinance",  # the link the email gave Ben
    }
    assert by <= plan["approvals"][0]["decideBy"]  # the gateway's signed deadline (tightened to the holds, if so)
    assert words.startswith(f"{by[:10]} {by[11:16]} UTC (in ")  # the same deadline in words (HATP-GW-96)
    assert (signed_in, who) == (200, {"human": "human://example.org/ben"})
    assert (decided, result) == (200, {"state": "approved"})
    assert status["outcome"] == "COMMITTED"
    [approval] = [v for v in status["votes"] if v["branchId"] == "finance"]
    assert approval["decision"] == "yes" and approval["voter"] == suite.gateway_id

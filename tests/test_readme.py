"""The README's code examples run: the participant example prepares and commits, the gate refuses an unapproved call."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError
from mcp.server import MCPServer

README = Path(__file__).resolve().parents[1] / "README.md"
ORG = Path(__file__).resolve().parents[1] / "spec" / "fixtures" / "org"
NPM_MODULES = Path(__file__).resolve().parent / "e2e" / "npm_servers" / "node_modules"


def example(heading: str) -> dict[str, Any]:
    """Execute the first python block after `heading` and return its namespace."""
    text = README.read_text()
    section = text[text.index(heading) :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, f"no python block after {heading!r}"
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(code.group(1), f"README.md ({heading})", "exec"), namespace)
    return namespace


def test_the_readme_names_the_newcomers_two_commands_first() -> None:
    head = README.read_text().split("\n## ")[0]
    assert "make demo-mcp" in head and "make test" in head


@pytest.mark.anyio
async def test_the_participant_example_advertises_hatp_and_commits_a_branch_once_over_mcp(tmp_path: Path) -> None:
    from hatp_mcp.core.model.evidence import Preconditions
    from hatp_mcp.core.model.messages import CommitRequest, PrepareRequest
    from hatp_mcp.core.model.plan import Plan
    from hatp_mcp.core.signing.canonical import digest as digest_of
    from hatp_mcp.core.signing.keys import Keyring
    from hatp_mcp.mcp.extension import read_advertisement
    from hatp_mcp.mcp.participant_client import mcp_participant
    from hatp_mcp.runtime.clock import SystemClock
    from hatp_mcp.runtime.coordinator_trust import write_trust_list
    from tests.coordinators import COORDINATOR, KEY, decision_for, signer
    from tests.factories import trip_plan_json

    trust = write_trust_list(tmp_path / "trust", {COORDINATOR: KEY.public_jwk()})
    server = example("## Joining transactions with your own MCP server")["build"](str(tmp_path), str(trust))
    raw = trip_plan_json()
    raw["branches"][2]["participant"] = "mcp://calendar.example/hatp"
    plan = Plan.model_validate(raw)
    digest = plan.digest()
    async with Client(server) as client:
        advertised = read_advertisement(client.server_capabilities)
        assert advertised["operations"]["event.create"]["tier"] == "compensate"
        ring = Keyring.from_jwks({"keys": advertised["keys"]})
        calendar = mcp_participant("mcp://calendar.example/hatp", client, ring, signer=signer(SystemClock()))
        prepared = await calendar.prepare(
            PrepareRequest(
                txn_id=plan.txn_id, branch_id="event", plan_digest=digest, plan=plan, coordinator=COORDINATOR
            )
        )
        assert prepared.vote["decision"] == "yes"
        commit = CommitRequest(
            txn_id=plan.txn_id,
            branch_id="event",
            plan_digest=digest,
            preconditions=Preconditions.model_validate(prepared.receipt["preconditions"]),
            decision=decision_for(plan),
            vote_digest=digest_of(prepared.vote),
        )
        first = await calendar.commit(commit)
        assert first.receipt["outcome"] == "ok" and first.receipt["undoToken"] == f"{plan.txn_id}:event"
        assert await calendar.commit(commit) == first  # a retry is a status query: the first answer again


@pytest.mark.anyio
async def test_the_gate_example_refuses_a_call_without_an_approval(tmp_path: Path) -> None:
    server = MCPServer("payments")
    charged: list[str] = []

    @server.tool()
    def charge_card(amount: str, payee: str) -> str:
        charged.append(amount)
        return "charged"

    example("## Gating one risky tool")["gated"](server, str(ORG), str(tmp_path / "replay.db"))
    async with Client(server) as client:
        with pytest.raises(MCPError) as err:
            await client.call_tool("charge_card", {"amount": {"value": "10", "currency": "USD"}, "payee": "acme"})
    assert err.value.code == -32050 and charged == []


@pytest.mark.anyio
async def test_the_journal_example_rolls_the_refund_back_when_the_label_fails(tmp_path: Path) -> None:
    ns = example("## Undo what an agent did")
    told = await ns["return_item"](str(tmp_path / "journal.db"))
    assert told == "ROLLED_BACK: [('refund', 'ROLLED_BACK'), ('label', 'FAILED')]"
    assert ns["refunds"] == {}  # the refund was reversed


@pytest.mark.anyio
async def test_the_claude_desktop_walkthroughs_commands_run_as_written_and_make_the_service_block(
    tmp_path: Path,
) -> None:
    import json

    from hatp_mcp.cli.org_layout import load_suite
    from tests.readme_walkthrough import commands, run

    setup, enrol, _terminal, *_wrapping = commands()
    assert [c.split()[1] for c in setup] == ["init-org", "card", "card", "card", "mcp-config"]
    for command in setup:
        await run(command, tmp_path)
    org = tmp_path / "hatp-example"
    block = json.loads((org / "claude-desktop.json").read_text())
    servers = block["mcpServers"]  # the bridges to `hatp serve` (HATP-MCP-45)
    assert {n: s["args"][2:4] for n, s in servers.items()} == {
        f"hatp-{n}": ["connect", n] for n in ("coordinator", "gateway", "directory")
    }
    gateway_url = f"http://127.0.0.1:{load_suite(org).gateway_mcp_port}/mcp"
    assert block["httpServers"]["hatp-gateway"]["url"] == gateway_url
    assert "test-only" not in json.dumps(block) and "acme.com" not in json.dumps(block)
    link = (await run(enrol[0], tmp_path)).strip()  # the rest needs Ben's browser: tests/e2e/test_org_config.py
    assert link.startswith(f"http://localhost:{load_suite(org).inbox_port}/enrol?code=")
    assert json.loads(await run(enrol[1], tmp_path)) == []


@pytest.mark.anyio
@pytest.mark.e2e
async def test_the_proxy_policy_example_runs_server_memory_and_a_rollback_leaves_its_file_as_it_was(
    tmp_path: Path,
) -> None:
    import json
    import shutil

    import anyio
    from mcp.client.stdio import stdio_client

    from hatp_mcp.mcp.launch import stdio_params

    text = README.read_text()
    section = text[text.index("## Any MCP server behind a policy file") :]
    install = re.search(r"```sh\n(.*?)```", section, re.S)
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert install and block and install.group(1).strip().startswith("npm install @modelcontextprotocol/server-memory")
    modules = NPM_MODULES
    if shutil.which("node") is None or not (modules / "@modelcontextprotocol" / "server-memory").is_dir():
        pytest.fail("server-memory is not installed: run `make npm-servers` (needs node and npm)")
    (tmp_path / "node_modules").symlink_to(modules)  # what the README's npm install gives, pinned by the lockfile
    memory = tmp_path / "memory.jsonl"
    (tmp_path / "policy.json").write_text(block.group(1).replace("/home/you/memory.jsonl", str(memory)))
    policy = json.loads((tmp_path / "policy.json").read_text())
    assert policy["upstream"]["env"] == {"MEMORY_FILE_PATH": str(memory)}
    params = stdio_params("servers.journal_proxy", tmp_path / "proxy-data", ["--policy", str(tmp_path / "policy.json")])
    with anyio.fail_after(60):
        async with Client(stdio_client(params)) as client:
            await client.call_tool("saga_begin", {"name": "notes"})
            made = await client.call_tool(
                "create_entities", {"entities": [{"name": "ada", "entityType": "person", "observations": []}]}
            )
            await client.call_tool(
                "add_observations", {"observations": [{"entityName": "ada", "contents": ["writes code"]}]}
            )
            grown = memory.read_text()
            done = await client.call_tool("saga_rollback", {})
    assert not made.is_error and "writes code" in grown
    assert done.structured_content is not None and done.structured_content["status"] == "ROLLED_BACK"
    assert memory.read_text() == ""  # everything the saga made was deleted again


@pytest.mark.anyio
async def test_the_walkthroughs_terminal_approver_decides_with_a_key_on_the_card_and_a_wrong_key_exits_1(
    tmp_path: Path,
) -> None:
    """Ben without a browser, as the README writes it: a person's key, his card re-signed with it (a passkey kept),
    an ask waiting for him listed and approved from the terminal; the same command with a key not on his card exits
    1 naming the rule, and leaves nothing for the gateway."""
    import json
    import os
    import sys
    from datetime import UTC, datetime

    import anyio

    from hatp_mcp.cli.org_layout import OrgLayout
    from hatp_mcp.core.model.example_plan import org_trip_plan
    from hatp_mcp.core.signing.keys import SigningKey
    from hatp_mcp.runtime.clock import FakeClock
    from hatp_mcp.runtime.gateway.driver import GatewayApprover
    from hatp_mcp.runtime.org import load_directory
    from hatp_mcp.store.gateway_store import SqliteGatewayStore
    from tests.readme_walkthrough import commands, run

    setup, _enrol, terminal, *_wrapping = commands()
    assert [c.split()[1] for c in terminal] == ["keys", "card", "inbox", "inbox"]
    for command in setup:
        await run(command, tmp_path)
    layout = OrgLayout(tmp_path / "hatp-example")
    ben_card = layout.cards / "ben.json"
    card = json.loads(ben_card.read_text())  # a passkey enrolled earlier, as hatp enrol approve puts it on
    passkey = {"type": "passkey", "id": "cred-ben-1", "publicKey": "pQECAyYgASFYIA"}
    card["keys"] = [*card["keys"], passkey]
    ben_card.write_text(json.dumps(card))
    await run(terminal[0], tmp_path)
    assert "--update" in terminal[1] and (await run(terminal[1], tmp_path)).startswith("human://example.org/ben")
    card = json.loads(ben_card.read_text())
    assert passkey in card["keys"] and [k["type"] for k in card["keys"]] == ["passkey", "ed25519"]
    directory, ignored = load_directory(layout.root)
    assert ignored == [] and directory.card("human://example.org/ben") is not None  # re-signed, trusted

    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    store = SqliteGatewayStore(layout.data("gateway"))
    key = SigningKey.from_jwk(json.loads(layout.gateway_key.read_text()))
    gateway = GatewayApprover(directory=directory, key=key, store=store, clock=clock)
    plan = org_trip_plan(clock.now(), "txn-terminal-1", "human://example.org/ann", "agent://example.org/claude")
    await gateway.ask(plan, "finance")
    store.close()
    listed = await run(terminal[2], tmp_path)
    assert listed.split()[0] == "txn-terminal-1/finance"
    approve = terminal[3].replace("ASK_ID", "txn-terminal-1/finance")
    wrong = tmp_path / "not-bens.private.jwk.json"
    wrong.write_text(json.dumps(SigningKey.generate(["approver"]).private_jwk()))
    env = os.environ | {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    refused = await anyio.run_process(
        ["bash", "-euc", approve.replace("~/ben.private.jwk.json", str(wrong))], cwd=tmp_path, env=env, check=False
    )
    assert refused.returncode == 1 and "HATP-GW-20" in refused.stderr.decode()
    reopened = SqliteGatewayStore(layout.data("gateway"))
    try:
        assert reopened.proofs("txn-terminal-1/finance") == []  # nothing left for the gateway
        assert "signed with key" in await run(approve, tmp_path)
        [left] = reopened.proofs("txn-terminal-1/finance")
        assert left.proof["human"] == "human://example.org/ben" and left.proof["decision"] == "approve"
    finally:
        reopened.close()


def test_the_proxy_gate_example_is_a_policy_the_proxy_reads_HATP_PXY_20() -> None:
    import json

    from hatp_mcp.core.model.proxy_policy import load_policy

    text = README.read_text()
    section = text[text.index("## Any MCP server behind a policy file") : text.index("## Where things are")]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    policy = load_policy(json.loads(blocks[1]))
    gate = policy.tools["get-sum"].gate
    assert gate is not None and (gate.amount, gate.currency, gate.max) == ("args.a", "USD", "1000")
    assert policy.budgets[0].limit == "30"


@pytest.mark.anyio
async def test_the_proxy_participant_example_passes_hatp_proxy_check_against_server_memory(tmp_path: Path) -> None:
    import json
    import shutil
    import sys

    import anyio

    from tests.coordinators import trust_dirs

    text = README.read_text()
    section = text[text.index("A `participant` tool joins HATP transactions") :]
    block = re.search(r"```json\n(.*?)```", section, re.S)
    assert block
    if shutil.which("node") is None or not (NPM_MODULES / "@modelcontextprotocol" / "server-memory").is_dir():
        pytest.fail("server-memory is not installed: run `make npm-servers` (needs node and npm)")
    (tmp_path / "node_modules").symlink_to(NPM_MODULES)
    memory = tmp_path / "memory.jsonl"
    (tmp_path / "policy.json").write_text(block.group(1).replace("/home/you/memory.jsonl", str(memory)))
    assert json.loads((tmp_path / "policy.json").read_text())["tools"]["create_entities"]["policy"] == "participant"
    data = tmp_path / "memory-proxy"  # the README's --data, trusting one coordinator
    trust_dirs([data])
    check = [sys.executable, "-m", "hatp_mcp.cli", "proxy", "check", str(tmp_path / "policy.json"), "--data", str(data)]
    with anyio.fail_after(60):
        done = await anyio.run_process(check, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert "create_entities" in done.stdout.decode() and "participant" in done.stdout.decode()

"""The proxy in participant mode in front of the official npm server-memory, as real processes, when the upstream
refuses the undo (spec/proxy.md section 3, HATP-PXY-62): server-memory's `delete_observations` (marked
idempotentHint, so it needs no lookup: HATP-PXY-65) is a compensate-tier participant undone by `add_observations`.
The entity is deleted out of band after the commit, so the undo finds nothing and server-memory refuses it: the
coordinator gets a signed receipt saying so, the branch stays committed, and nothing reports it compensated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import CompensateRequest, StatusRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.mcp.launch import stdio_params
from tests.coordinators import commit_request, trusting
from tests.e2e.plans import live_plan, participant, prepare_for
from tests.e2e.test_proxy_npm_servers import hatp_run, server

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

MEMORY = "mcp://memory.example/hatp"
ENTITY = {"type": "entity", "name": "dana", "entityType": "person", "observations": ["likes aisle seats", "o-2"]}


def policy(memory_file: Path) -> dict[str, Any]:
    return {
        "upstream": {
            "command": "node",
            "args": [server("server-memory")],
            "env": {"MEMORY_FILE_PATH": str(memory_file)},
        },
        "participant": {"uri": MEMORY},
        "default": "deny",
        "tools": {
            "delete_observations": {
                "policy": "participant",
                "participant": {
                    "tier": "compensate",
                    "undo": {
                        "tool": "add_observations",
                        "arguments": {
                            "observations": "args.deletions[*].{entityName: entityName, contents: observations}"
                        },
                    },
                },
            },
        },
    }


def memory_plan() -> Plan:
    doc = live_plan("txn-m-undo-fails").wire()
    doc["approvals"] = []
    doc["branches"] = [
        {
            "branchId": "forget",
            "participant": MEMORY,
            "operation": "delete_observations",
            "tier": "compensate",
            "args": {"deletions": [{"entityName": "dana", "observations": ["likes aisle seats"]}]},
            "maxDurationSeconds": 30,
            "undoWindowSeconds": 3600,
            "settles": [],
        }
    ]
    return Plan.model_validate(doc)


async def test_HATP_PXY_62_server_memory_refusing_the_undo_is_a_signed_refusal_and_the_branch_stays_committed(
    tmp_path: Path,
) -> None:
    memory_file = tmp_path / "memory.jsonl"
    memory_file.write_text(json.dumps(ENTITY) + "\n")
    (tmp_path / "policy.json").write_text(json.dumps(policy(memory_file)))
    data = trusting(tmp_path / "proxy")
    params = stdio_params("servers.journal_proxy", data, ["--policy", str(tmp_path / "policy.json")])
    plan = memory_plan()
    ids = {"txn_id": plan.txn_id, "branch_id": "forget", "plan_digest": plan.digest()}
    with anyio.fail_after(90), (tmp_path / "proxy.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            jwk = json.loads((data / "participant" / "public.jwk.json").read_text())
            part = participant(MEMORY, client, Keyring([PublicKeyEntry.from_jwk(jwk)]))
            prepared = await part.prepare(prepare_for(plan, "forget"))
            assert prepared.vote["decision"] == "yes", prepared.vote
            pre = Preconditions.model_validate(prepared.receipt["preconditions"])
            committed = (await part.commit(commit_request(prepared.vote, **ids, preconditions=pre))).receipt
            assert committed["outcome"] == "ok", committed
            assert "likes aisle seats" not in memory_file.read_text()
            memory_file.write_text("")  # out of band: the entity is deleted, so add_observations finds nothing
            undo = (await part.compensate(CompensateRequest(**ids))).receipt
            status = await part.status(StatusRequest(txn_id=plan.txn_id, branch_id="forget"))
    assert (undo["phase"], undo["outcome"], undo["code"]) == ("compensate", "refused", "UPSTREAM_REFUSED"), undo
    assert "add_observations" in undo["reason"] and "dana" in undo["reason"]
    assert status.state == "committed"
    assert memory_file.read_text() == ""


async def test_HATP_PXY_64_proxy_check_checks_the_participant_side_and_init_offers_no_participant(
    tmp_path: Path,
) -> None:
    memory_file = tmp_path / "memory.jsonl"
    (tmp_path / "policy.json").write_text(json.dumps(policy(memory_file)))
    data = tmp_path / "proxy"
    check = ["proxy", "check", str(tmp_path / "policy.json"), "--data", str(data)]
    claude = {"mcpServers": {"memory": {"command": "node", "args": [server("server-memory")]}}}
    (tmp_path / "claude.json").write_text(json.dumps(claude))
    init = ["proxy", "init", "--claude-config", str(tmp_path / "claude.json"), "--out", str(tmp_path / "wrapped")]
    with anyio.fail_after(120):
        untrusting = await hatp_run(*check)
        trusting(data)
        checked = await hatp_run(*check)
        code, summary, _ = await hatp_run(*init)
    status, out, lines = untrusting
    assert status == 2 and out is None and len(lines) == 1, lines
    assert lines[0].startswith("hatp: HATP-PXY-64 at participant: no trust list") and "Fix: " in lines[0]
    status, out, _ = checked
    assert status == 0 and out["tools"]["delete_observations"] == "participant"
    assert out["participant"]["uri"] == MEMORY and out["participant"]["key"].startswith("made on first start")
    assert not (data / "participant").exists() and not memory_file.exists()  # nothing made, nothing served
    assert code == 0 and "participant" not in summary["memory"].values()
    readme = (tmp_path / "wrapped" / "memory" / "README.md").read_text()
    assert '"policy": "participant"' in readme and "delete_observations" in readme  # marked idempotentHint

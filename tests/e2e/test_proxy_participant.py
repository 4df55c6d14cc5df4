"""The proxy in participant mode (spec/proxy.md section 3) in front of the official npm server-memory, as real
processes: it passes `hatp conformance participant`, and it is a branch of the demo trip beside the demo servers,
committed by the demo coordinator after a person approves, then compensated when another branch's commit is
refused; the memory file is byte-identical to before and the record verifies offline with `hatp verify`."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import PublicKeyEntry
from hatp_mcp.mcp.http_callers import new_token, write_callers
from hatp_mcp.mcp.launch import ROOT, HttpProcess, launch_http
from tests.acme_org import ORG_DIR
from tests.coordinators import trust_coordinator_dirs
from tests.e2e.coordinator_suite import Agent, events, record_keyring, trip, uri
from tests.e2e.test_coordinator_http import Suite
from tests.e2e.test_proxy_npm_servers import server

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

MEMORY = uri("memory")
TRIP_PARTICIPANTS = ("airline", "hotel", "calendar", "payments")


def participant_policy(memory_file: Path) -> dict[str, Any]:
    """server-memory's create_entities as a compensate-tier participant: undone by delete_entities, its
    precondition the names it would create as open_nodes finds them, and open_nodes its lookup (server-memory does
    not mark it idempotentHint: HATP-PXY-65)."""
    return {
        "upstream": {
            "command": "node",
            "args": [server("server-memory")],
            "env": {"MEMORY_FILE_PATH": str(memory_file)},
        },
        "participant": {"uri": MEMORY},
        "default": "deny",
        "tools": {
            "read_graph": {"policy": "pass"},
            "create_entities": {
                "policy": "participant",
                "participant": {
                    "tier": "compensate",
                    "undo": {"tool": "delete_entities", "arguments": {"entityNames": "args.entities[*].name"}},
                    "precondition": {
                        "tool": "open_nodes",
                        "arguments": {"names": "args.entities[*].name"},
                        "version": "result.entities[*].name",
                    },
                    "lookup": {
                        "tool": "open_nodes",
                        "arguments": {"names": "args.entities[*].name"},
                        "happened": "length(result.entities) > `0`",
                    },
                },
            },
        },
    }


async def test_HATP_PXY_32_the_proxy_in_front_of_server_memory_passes_hatp_conformance_participant(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.json"
    memory_file = tmp_path / "memory.jsonl"
    policy.write_text(json.dumps(participant_policy(memory_file)))
    command = shlex.join(
        [
            *(sys.executable, "-m", "servers.journal_proxy", "--transport", "stdio", "--data", str(tmp_path / "proxy")),
            *("--policy", str(policy), "--trusted-coordinators", "{trust}"),
        ]
    )
    args = {"entities": [{"name": "e-{txn}", "entityType": "check", "observations": ["made by a conformance run"]}]}
    argv = [sys.executable, "-m", "hatp_mcp.cli", "conformance", "participant", "--command", command]
    argv += ["--participant", MEMORY, "--args", json.dumps(args), "--json", "--timeout", "15"]
    with anyio.fail_after(150):
        done = await anyio.run_process(argv, cwd=ROOT, check=False)
    report = json.loads(done.stdout)
    assert report["failedRules"] == [] and report["counts"]["skipped"] == 0, done.stdout.decode()
    assert done.returncode == 0 and report["ok"] is True
    assert {"HATP-PART-1", "HATP-PART-4", "HATP-PART-6", "HATP-PART-7", "HATP-TRUST-7"} <= {
        c["rule"] for c in report["checks"]
    }
    # the one committed entity was compensated; every other branch was aborted before anything was made
    assert not memory_file.exists() or memory_file.read_text().strip() == ""


def with_memory(plan: Plan, name: str) -> Plan:
    """The demo trip plus a branch on the wrapped server-memory: an entity recording the trip."""
    doc = plan.wire()
    doc["branches"].insert(
        2,
        {
            "branchId": "note",
            "participant": MEMORY,
            "operation": "create_entities",
            "tier": "compensate",
            "args": {"entities": [{"name": name, "entityType": "trip", "observations": ["Berlin offsite"]}]},
            "maxDurationSeconds": 30,
            "undoWindowSeconds": 86400,
            "compensation": {"operation": "delete_entities", "args": {"entityNames": [name]}},
            "settles": [],
        },
    )
    return Plan.model_validate(doc)


@pytest.fixture(scope="module")
async def suite(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Suite, HttpProcess, Path]]:
    data = tmp_path_factory.mktemp("proxy-participant")
    outside = tmp_path_factory.mktemp("memory-proxy")  # apart from `data`: record_keyring reads data's keys
    memory_file = outside / "memory.jsonl"
    policy = outside / "policy.json"
    policy.write_text(json.dumps(participant_policy(memory_file)))
    async with AsyncExitStack() as stack:
        s = Suite(data, stack)
        for name in TRIP_PARTICIPANTS:
            await s.start(name, f"servers.{name}", ["--demo-tools"])
        await s.start("gateway", "servers.gateway", ["--org", str(ORG_DIR)])
        proxy_data = outside / "proxy"
        trust_coordinator_dirs([proxy_data], [data / c for c in Suite.COORDINATORS])
        callers = write_callers(outside / "callers.json", {"agent://acme.com/nobody": new_token()}, sees_all=[])
        memory = await stack.enter_async_context(
            launch_http(
                "servers.journal_proxy",
                proxy_data,
                extra=["--policy", str(policy), "--callers", str(callers)],
                ready_timeout=60,
            )
        )
        yield s, memory, outside


async def verify_offline(record: dict[str, Any], data: Path, proxy_data: Path, where: Path) -> dict[str, Any]:
    """`hatp verify` as a process, with every key the record is signed with, the proxy's bound to its URI."""
    ring = record_keyring(data)
    jwk = json.loads((proxy_data / "participant" / "public.jwk.json").read_text())
    ring.add(PublicKeyEntry.from_jwk(jwk).with_party(MEMORY))
    (where / "keys.json").write_text(json.dumps(ring.to_jwks()))
    (where / "record.json").write_text(json.dumps(record))
    argv = [sys.executable, "-m", "hatp_mcp.cli", "verify", str(where / "record.json")]
    argv += ["--keys", str(where / "keys.json"), "--json"]
    with anyio.fail_after(60):
        done = await anyio.run_process(argv, cwd=ROOT, check=False)
    out: dict[str, Any] = json.loads(done.stdout)
    out["exit"] = done.returncode
    return out


def entities(outside: Path) -> list[str]:
    """The entity names server-memory holds, read from its file as the proxy's upstream wrote it."""
    text = (outside / "memory.jsonl").read_text() if (outside / "memory.jsonl").exists() else ""
    return [json.loads(line)["name"] for line in text.splitlines() if line.strip() and '"entity"' in line]


async def test_HATP_PXY_35_a_trip_with_a_wrapped_server_memory_branch_commits_then_another_is_compensated(
    suite: tuple[Suite, HttpProcess, Path], tmp_path: Path
) -> None:
    s, memory, outside = suite
    keys = {"memory": outside / "proxy" / "participant" / "public.jwk.json"}
    with anyio.fail_after(150):
        async with s.coordinator("coordinator", keys=keys, memory=memory.url) as proc, proc.client() as client:
            agent = Agent(client)
            await agent.begin(with_memory(trip("txn-m-commit", "2026-12-10", "14C"), "trip-txn-m-commit"))
            await agent.asked("txn-m-commit")
            await s.decide("txn-m-commit", "approve")
            done = await agent.outcome("txn-m-commit")
            assert (done["outcome"], done["state"]) == ("COMMITTED", "committed")
            assert entities(outside) == ["trip-txn-m-commit"]
            committed = await verify_offline(done["record"], s.data, outside / "proxy", tmp_path)
            before = (outside / "memory.jsonl").read_bytes()

            # the card's issuer changes it after the approval: the final payment's commit is refused, and the
            # committed branches, the wrapped server-memory's among them, are compensated
            await agent.begin(with_memory(trip("txn-m-undo", "2026-12-12", "17A"), "trip-txn-m-undo"))
            await agent.asked("txn-m-undo")
            await s.tool("payments", "card_change", {"resource": "tok_visa_4242", "state": "free"})
            await s.decide("txn-m-undo", "approve")
            undone = await agent.outcome("txn-m-undo")
    assert committed["exit"] == 0 and committed["ok"] is True, committed
    assert undone["outcome"] == "ABORTED"
    note = [e for e in undone["record"]["events"] if (e.get("body") or {}).get("branchId") == "note"]
    assert [e["event"] for e in note if e["event"] in ("commit", "compensate")] == ["commit", "compensate"]
    assert "compensate" in events(undone["record"])
    assert (outside / "memory.jsonl").read_bytes() == before  # byte-identical: the entity made was deleted
    aborted = await verify_offline(undone["record"], s.data, outside / "proxy", tmp_path)
    assert aborted["exit"] == 0 and aborted["ok"] is True, aborted

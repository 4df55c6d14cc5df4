"""What the journal and the proxy answer fits the JSON Schemas published in spec/schemas (spec/journal.md
HATP-JRN-20): real answers, made in memory, checked against the schema files on disk (not the models), so a
member a server adds without its schema, or a schema that drifts from the wire, fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.cli import main
from hatp_mcp.core.journal.events import SagaStatus, StepState
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.journal_wire import SAGA_STATUSES, STEP_STATES
from hatp_mcp.core.model.proxy_policy import load_policy
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.mcp.journal_proxy import RECOVERY_POLICY, SAGA_TOOLS, JournalingProxy
from hatp_mcp.mcp.journal_server import McpUndo, agent_tools, serve_journal
from hatp_mcp.mcp.proxy_reload import STATUS_FILE, PolicyWatch
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.store.journal_store import MemoryJournalStore
from hatp_mcp.store.shadow_log import ShadowLog
from tests.mcp.test_proxy_shadow_reload import upstream

pytestmark = pytest.mark.anyio

SCHEMAS = Path(__file__).resolve().parents[2] / "spec" / "schemas"


def fits(name: str, value: Any) -> list[str]:
    """The schema errors of `value` against spec/schemas/NAME.schema.json (none: it fits)."""
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    return [f"{list(e.absolute_path)}: {e.message}" for e in Draft202012Validator(schema).iter_errors(value)]


POLICY = {
    "upstream": {"url": "http://127.0.0.1:9/mcp"},
    "default": "irreversible",
    "tools": {
        "make": {"policy": "journal", "undo": {"tool": "unmake", "arguments": {"id": "result.id"}}},
        "unmake": {"policy": "deny"},
    },
    "shadow": True,
}


async def test_HATP_JRN_20_the_proxys_saga_answers_dead_letters_and_shadow_entries_fit_their_schemas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, made = upstream()
    store, key = MemoryJournalStore(), SigningKey.generate(["journal"])
    log = ShadowLog(tmp_path / "shadow.db")
    answers: list[Any] = []
    with anyio.fail_after(20):
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            first = JournalingProxy(client, tools, Journal(store, key, policy=RECOVERY_POLICY), load_policy(POLICY))
            first.shadow_log = log
            async with Client(first.server()) as model:
                answers.append((await model.call_tool("saga_begin", {"name": "trip"})).structured_content)
                await model.call_tool("make", {"name": "a"})
                await model.call_tool("forget", {"name": "a"})  # irreversible by the default
                await model.call_tool("unmake", {"id": "zz"})  # denied: shadowed
            assert first.current is not None
            await first.current.add_step("make", {"name": "lost"})  # its answer lost in a crash
            journal = Journal(store, key, policy=RECOVERY_POLICY)
            second = JournalingProxy(client, tools, journal, load_policy(POLICY))
            await journal.recover()
            await second.reopen()
            async with Client(second.server()) as model:
                answers.append((await model.call_tool("saga_status", {})).structured_content)
                answers.append((await model.call_tool("saga_rollback", {"reason": "wrong"})).structured_content)
            dead = [{"id": row.id, **row.entry} for row in await store.dead_letters()]
    log.close()
    assert made == set()  # a made and forgotten (irreversible), zz never there
    kinds = {
        (a["status"], bool(a.get("recovered")), bool(a.get("deadLetters")), bool(a.get("leftInPlace"))) for a in answers
    }
    assert ("ROLLBACK_FAILED", True, True, True) in kinds  # every optional member was exercised
    for answer in answers:
        assert fits("proxy-saga-status", answer) == []
    assert dead and all(fits("dead-letter", d) == [] for d in dead)
    assert main(["proxy", "shadow", "--data", str(tmp_path)]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries and all(fits("shadow-entry", e) == [] for e in entries)
    # a planted violation: a member a server adds without its schema is caught
    assert fits("proxy-saga-status", {**answers[-1], "extra": 1}) != []
    assert fits("dead-letter", {**dead[0], "phase": "later"}) != []


async def test_HATP_JRN_20_the_journal_servers_answers_and_the_policy_status_fit_their_schemas(
    tmp_path: Path,
) -> None:
    journal = Journal(MemoryJournalStore(), SigningKey.generate(["journal"]), tools=agent_tools(McpUndo({})))
    mcp = MCPServer("journal", log_level="WARNING")
    serve_journal(mcp, journal, McpUndo({}))
    with anyio.fail_after(20):
        async with Client(mcp) as agent:
            begun = (await agent.call_tool("saga_begin", {"name": "notes"})).structured_content
            assert begun is not None
            sid = begun["sagaId"]
            step = (await agent.call_tool("saga_add_step", {"saga_id": sid, "action": "wrote"})).structured_content
            assert step is not None
            await agent.call_tool("saga_complete_step", {"saga_id": sid, "step_id": step["stepId"], "output": {"a": 1}})
            status = (await agent.call_tool("saga_status", {"saga_id": sid, "include_record": True})).structured_content
            done = (await agent.call_tool("saga_complete", {"saga_id": sid})).structured_content
    for answer in (begun, status, done):
        assert fits("journal-saga-status", answer) == []
    assert status is not None and "record" in status
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    server, _made = upstream()
    async with Client(server) as client:
        proxy = JournalingProxy(client, (await client.list_tools()).tools, journal, load_policy(POLICY))
        watch = PolicyWatch(path, proxy, tmp_path, FakeClock(parse_ts("2026-12-05T04:00:00Z")), lambda _: None)
        path.write_text(json.dumps({**POLICY, "tools": {"nosuch": {"policy": "pass"}}}))
        await watch()
    assert fits("policy-status", json.loads((tmp_path / STATUS_FILE).read_text())) == []


def test_HATP_JRN_20_the_schemas_name_the_journals_own_states_and_the_saga_tools_arguments() -> None:
    assert SAGA_STATUSES == tuple(s.value for s in SagaStatus)
    assert STEP_STATES == tuple(s.value for s in StepState)
    declared = {t.name: set((t.input_schema or {}).get("properties", {})) for t in SAGA_TOOLS}
    published = {
        name: set(json.loads((SCHEMAS / f"{schema}.schema.json").read_text())["properties"])
        for name, schema in (
            ("saga_begin", "saga-begin-request"),
            ("saga_complete", "saga-request"),
            ("saga_status", "saga-request"),
            ("saga_rollback", "saga-rollback-request"),
        )
    }
    assert declared == published

"""The proxy's shadow mode and its policy file taken again while it serves, in memory (hatp_mcp/mcp/journal_proxy.py,
hatp_mcp/mcp/proxy_reload.py, hatp_mcp/store/shadow_log.py; spec/proxy.md HATP-PXY-40..44). The same over real
processes and an npm server: tests/e2e/test_proxy_shadow_reload.py."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.cli import main
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.proxy_policy import Budget, load_policy
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.mcp.journal_proxy import RECOVERY_POLICY, JournalingProxy
from hatp_mcp.mcp.proxy_gate import GateSetup, ProxyGate, build_gate
from hatp_mcp.mcp.proxy_reload import STATUS_FILE, PolicyWatch
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.store.journal_store import MemoryJournalStore
from hatp_mcp.store.shadow_log import ShadowLog
from hatp_mcp.store.step_rules import StepRules
from tests.acme_org import ORG_DIR
from tests.mcp.test_journal_proxy import upstream as journal_proxy_upstream

pytestmark = pytest.mark.anyio

AGENT_KEY = ORG_DIR / "test-only-keys" / "agents" / "travel-bot.private.jwk.json"
SECRET = "s3cr3t-value-never-logged"


def upstream() -> tuple[MCPServer, set[str]]:
    """test_journal_proxy's upstream (make, unmake, find) with a tool to hide and one to gate."""
    server, made = journal_proxy_upstream()

    @server.tool()
    def forget(name: str) -> dict[str, Any]:
        made.discard(name)
        return {"forgot": name}

    @server.tool()
    def pay(a: int) -> dict[str, Any]:
        made.add(f"paid {a}")
        return {"paid": a}

    return server, made


def policy_doc(**over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "upstream": {"url": "http://127.0.0.1:9/mcp"},
        "default": "deny",
        "tools": {
            "make": {"policy": "journal", "undo": {"tool": "unmake", "arguments": {"id": "result.id"}}},
            "unmake": {"policy": "deny"},
            "forget": {"policy": "hide"},
            "pay": {
                "policy": "gate",
                "gate": {
                    "address": "human://acme.com/bob",
                    "action": "travel.spend",
                    "amount": "args.a",
                    "currency": "USD",
                    "max": "10",
                },
            },
        },
        "budgets": [{"currency": "USD", "limit": "30", "windowSeconds": 3600}],
    }
    doc.update(over)
    return doc


NOW = parse_ts("2026-12-05T04:00:00Z")


def journal() -> Journal:
    return Journal(MemoryJournalStore(), SigningKey.generate(["journal"]), clock=FakeClock(NOW))


def shadow_gate(tmp_path: Path, budgets: Sequence[Budget] = ()) -> ProxyGate:
    """The proxy's gate over the acme.com organisation, with `budgets`, and no gateway reachable."""
    setup = GateSetup(org=ORG_DIR, server_id="mcp://shadow", agent_key=AGENT_KEY)
    return build_gate(setup, tmp_path, budgets, FakeClock(NOW), None)


async def shadowing(client: Client, gate: ProxyGate, log: ShadowLog) -> JournalingProxy:
    """The proxy in front of `client` with policy_doc in shadow mode, its gate and its shadow log."""
    tools = (await client.list_tools()).tools
    return JournalingProxy(client, tools, journal(), load_policy(policy_doc(shadow=True)), gate, shadow=log)


def call(tool: str, /, **arguments: Any) -> types.CallToolRequestParams:
    return types.CallToolRequestParams(name=tool, arguments=arguments)


def refusal(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error and result.structured_content is not None, result
    found: dict[str, Any] = result.structured_content["refusal"]
    return found


async def test_HATP_PXY_40_in_shadow_mode_denied_hidden_and_gated_calls_are_forwarded_and_recorded_with_the_rule(
    tmp_path: Path,
) -> None:
    server, made = upstream()
    gate = shadow_gate(tmp_path)
    log = ShadowLog(":memory:")
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = await shadowing(client, gate, log)
            assert "forget" in {t.name for t in proxy.listed}  # hide is not enforced: the tool is listed
            made.update({"a", "b"})
            assert not (await proxy.handle(None, call("unmake", id="a"))).is_error
            assert not (await proxy.handle(None, call("forget", name="b"))).is_error
            assert not (await proxy.handle(None, call("pay", a=50))).is_error
            assert not (await proxy.handle(None, call("pay", a=5))).is_error
    gate.ledger.close()
    assert made == {"paid 50", "paid 5"}  # every call reached the upstream
    got = [(e["tool"], e["policy"], e["rule"], e["code"]) for e in log.entries()]
    assert got == [
        ("unmake", "deny", "HATP-PXY-7", "TOOL_DENIED"),
        ("forget", "hide", "HATP-PXY-7", "UNKNOWN_TOOL"),
        ("pay", "gate", "HATP-PXY-22", "OVER_MAXIMUM"),
        ("pay", "gate", "HATP-PXY-21", "APPROVAL_NEEDED"),
    ]


async def test_HATP_PXY_40_a_shadow_log_that_cannot_be_written_refuses_the_call_and_sends_nothing() -> None:
    server, made = upstream()
    log = ShadowLog(":memory:")
    doc = policy_doc(shadow=True, budgets=[])
    del doc["tools"]["pay"]
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(doc), shadow=log)
            log.close()
            made.add("a")
            out = refusal(await proxy.handle(None, call("unmake", id="a")))
    assert (out["rule"], out["code"], made) == ("HATP-PXY-40", "SHADOW_LOG_UNWRITABLE", {"a"})


async def test_HATP_PXY_41_shadow_mode_still_journals_refuses_unknown_tools_and_logs_no_argument_value() -> None:
    server, made = upstream()
    log = ShadowLog(":memory:")
    doc = policy_doc(budgets=[])
    del doc["tools"]["pay"]
    j = journal()
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = JournalingProxy(
                client, (await client.list_tools()).tools, j, load_policy(doc), shadow=log, shadow_mode=True
            )
            unknown = refusal(await proxy.handle(None, call("nothing-here", x=1)))
            await proxy.handle(None, call("saga_begin", name="shadowed"))
            assert not (await proxy.handle(None, call("make", name=SECRET))).is_error
            assert not (await proxy.handle(None, call("unmake", id=SECRET))).is_error  # denied: shadowed
            status = (await proxy.handle(None, call("saga_status"))).structured_content or {}
    assert (unknown["rule"], unknown["code"]) == ("HATP-PXY-7", "UNKNOWN_TOOL")
    assert [s["tool"] for s in status["steps"]] == ["make"]  # still journaled
    entries = log.entries()
    assert [e["tool"] for e in entries] == ["unmake"] and len(entries[0]["argumentsDigest"]) > 20
    assert SECRET not in json.dumps(entries)
    assert made == set()  # the denied unmake reached the upstream, with its value


async def test_HATP_PXY_40_hatp_proxy_shadow_lists_the_log_for_the_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = ShadowLog(tmp_path / "shadow.db")
    log.record({"tool": "unmake", "rule": "HATP-PXY-7", "code": "TOOL_DENIED"})
    log.close()
    assert main(["proxy", "shadow", "--data", str(tmp_path)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(e["id"], e["rule"], e["code"]) for e in listed] == [(1, "HATP-PXY-7", "TOOL_DENIED")]


def write(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc))


def small_policy(**tools: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "make": {"policy": "journal", "undo": {"tool": "unmake", "arguments": {"id": "result.id"}}},
        "unmake": {"policy": "deny"},
    }
    base.update(tools)
    return {"upstream": {"url": "http://127.0.0.1:9/mcp"}, "default": "deny", "tools": base}


async def test_HATP_PXY_42_a_changed_policy_file_takes_effect_on_the_next_call(tmp_path: Path) -> None:
    server, made = upstream()
    path = tmp_path / "policy.json"
    write(path, small_policy())
    lines: list[str] = []
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(small_policy()))
            proxy.reload = PolicyWatch(path, proxy, tmp_path, FakeClock(NOW), lines.append)
            async with Client(proxy.server()) as model:
                made.add("a")
                before = await model.call_tool("unmake", {"id": "a"})
                write(path, small_policy(unmake={"policy": "pass"}))
                after = await model.call_tool("unmake", {"id": "a"})
    assert before.is_error and not after.is_error and made == set()
    status = json.loads((tmp_path / STATUS_FILE).read_text())
    assert "refused" not in status and lines and "in force" in lines[-1]


async def test_HATP_PXY_43_a_bad_change_is_refused_whole_with_the_reason_and_the_old_policy_stays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, made = upstream()
    path = tmp_path / "policy.json"
    write(path, small_policy())
    lines: list[str] = []
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(small_policy()))
            watch = PolicyWatch(path, proxy, tmp_path, FakeClock(NOW), lines.append)
            # a good change to one tool beside an unknown tool: nothing of it is taken
            write(path, small_policy(unmake={"policy": "pass"}, nosuch={"policy": "pass"}))
            await watch()
            assert proxy.rules["unmake"].action == "deny"
            assert main(["proxy", "status", "--data", str(tmp_path)]) == 1
            unknown = json.loads(capsys.readouterr().out)["refused"]
            other = small_policy(unmake={"policy": "pass"})
            other["upstream"] = {"url": "http://127.0.0.1:10/mcp"}
            write(path, other)
            await watch()
            changed = json.loads((tmp_path / STATUS_FILE).read_text())["refused"]
            made.add("a")
            still = await proxy.handle(None, call("unmake", id="a"))
    assert (unknown["rule"], unknown["code"], unknown["path"]) == ("HATP-PXY-4", "UNKNOWN_TOOL", "tools.nosuch")
    assert (changed["rule"], changed["code"], changed["path"]) == ("HATP-PXY-43", "UPSTREAM_CHANGED", "upstream")
    assert refusal(still)["code"] == "TOOL_DENIED" and made == {"a"}
    assert len(lines) == 2 and all("refused" in line for line in lines)


async def test_HATP_PXY_44_a_step_is_undone_by_the_undo_it_was_journaled_with_after_a_reload(tmp_path: Path) -> None:
    server, made = upstream()
    path = tmp_path / "policy.json"
    write(path, small_policy())
    with anyio.fail_after(10):
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            proxy = JournalingProxy(client, tools, journal(), load_policy(small_policy()))
            watch = PolicyWatch(path, proxy, tmp_path, FakeClock(NOW), lambda _: None)
            await proxy.handle(None, call("saga_begin", name="kept"))
            await proxy.handle(None, call("make", name="a"))
            # the new policy undoes make by an undo that would leave "a" in place
            write(
                path, small_policy(make={"policy": "journal", "undo": {"tool": "forget", "arguments": {"name": "'x'"}}})
            )
            await watch()
            assert proxy.rules["make"].undo is not None and proxy.rules["make"].undo.tool == "forget"
            status = (await proxy.handle(None, call("saga_rollback"))).structured_content or {}
    assert status["status"] == "ROLLED_BACK" and made == set()


async def restarted_and_rolled_back(
    client: Client, tools: list[types.Tool], store: MemoryJournalStore, key: SigningKey, rules: StepRules | None = None
) -> dict[str, Any]:
    """The proxy restarted over the same journal with a file that undoes `make` by forget('x'), then the open saga
    rolled back: its status."""
    other = small_policy(make={"policy": "journal", "undo": {"tool": "forget", "arguments": {"name": "'x'"}}})
    journal = Journal(store, key, policy=RECOVERY_POLICY)
    second = JournalingProxy(client, tools, journal, load_policy(other), step_rules=rules)
    await journal.recover()
    await second.reopen()
    return (await second.handle(None, call("saga_rollback"))).structured_content or {}


async def one_step_journaled(
    client: Client, tools: list[types.Tool], store: MemoryJournalStore, key: SigningKey
) -> str:
    """A proxy under the small policy begins saga 'kept' and journals make('a') in it: the saga's id."""
    first = JournalingProxy(client, tools, Journal(store, key, policy=RECOVERY_POLICY), load_policy(small_policy()))
    await first.handle(None, call("saga_begin", name="kept"))
    await first.handle(None, call("make", name="a"))
    assert first.current is not None
    return first.current.id


async def test_HATP_PXY_44_after_a_restart_with_another_file_a_step_is_undone_as_it_was_journaled() -> None:
    server, made = upstream()
    store, key = MemoryJournalStore(), SigningKey.generate(["journal"])
    with anyio.fail_after(10):
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            saga_id = await one_step_journaled(client, tools, store, key)
            status = await restarted_and_rolled_back(client, tools, store, key)
    assert status["status"] == "ROLLED_BACK" and made == set()  # unmake(a) ran, not forget('x')
    # the rule rode in the step's own entry, signed, in the write that journaled the step (no write of its own)
    stored = await store.load(saga_id)
    assert stored is not None
    started = [e for e in stored.events if e["event"] == "step.started"]
    assert [e["body"]["rule"]["undo"]["tool"] for e in started] == ["unmake"]


async def test_HATP_PXY_44_a_rule_forged_in_the_stored_journal_is_refused_and_nothing_is_undone() -> None:
    """The rule a step is undone by is read back from the journal after a restart: one changed in the store (an
    undo that would delete what the step made under another name) breaks the entry's signature, so the saga is not
    opened (HATP-JRN-12), nothing is undone, and the operator is alerted."""
    server, made = upstream()
    store, key = MemoryJournalStore(), SigningKey.generate(["journal"])
    alerts: list[dict[str, Any]] = []
    with anyio.fail_after(10):
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            saga_id = await one_step_journaled(client, tools, store, key)
            stored = store._sagas[saga_id].events  # the store, written by someone other than the journal
            started = next(e for e in stored if e["event"] == "step.started")
            started["body"]["rule"]["undo"] = {"tool": "forget", "arguments": {"name": "args.name"}}
            journal = Journal(store, key, policy=RECOVERY_POLICY, alert=alerts.append)
            second = JournalingProxy(client, tools, journal, load_policy(small_policy()))
            await journal.recover()
            await second.reopen()
            refused = await second.handle(None, call("saga_rollback", saga_id=saga_id))
    assert made == {"a"}  # neither the forged undo nor any other ran
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["refusal"]["code"] == "JOURNAL_TAMPERED"
    assert [a["sagaId"] for a in alerts] == [saga_id] and "HATP-JRN-12" in alerts[0]["error"]


async def test_HATP_PXY_44_a_step_journaled_by_an_older_proxy_is_undone_by_the_rule_it_kept_apart(
    tmp_path: Path,
) -> None:
    """Before the rule rode in the step's entry, a proxy kept it in DATA/step-rules.db; such a step, its entry
    without a rule, is still undone as it was journaled after the upgrade."""
    server, made = upstream()
    store, key = MemoryJournalStore(), SigningKey.generate(["journal"])
    with anyio.fail_after(10):
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            old = Journal(store, key, policy=RECOVERY_POLICY)
            JournalingProxy(client, tools, old, load_policy(small_policy()))  # registers make with the journal
            saga = await old.begin("kept")
            step = await saga.add_step("make", {"name": "a"})  # as the older proxy journaled it: no rule
            await client.call_tool("make", {"name": "a"})
            await saga.complete_step(step.step_id, {"id": "a"})
            with sqlite3.connect(tmp_path / "step-rules.db") as db:  # and kept its rule apart, as it did
                db.execute("CREATE TABLE step_rule (key TEXT PRIMARY KEY, rule TEXT NOT NULL)")
                rule = {
                    "action": "journal",
                    "undo": {"tool": "unmake", "arguments": {"id": "result.id"}},
                    "lookup": None,
                }
                db.execute("INSERT INTO step_rule VALUES (?, ?)", (step.key, json.dumps(rule)))
            rules = StepRules.open(tmp_path / "step-rules.db")
            assert rules is not None and StepRules.open(tmp_path / "none.db") is None
            status = await restarted_and_rolled_back(client, tools, store, key, rules)  # upgraded, another file
            rules.close()
    assert status["status"] == "ROLLED_BACK" and made == set()  # unmake(a) ran, not forget('x')


async def test_HATP_PXY_42_a_file_changed_before_the_watch_began_is_taken_on_the_first_request(tmp_path: Path) -> None:
    server, _made = upstream()
    path = tmp_path / "policy.json"
    write(path, small_policy(unmake={"policy": "pass"}))  # changed after the proxy read the file
    lines: list[str] = []
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(small_policy()))
            watch = PolicyWatch(path, proxy, tmp_path, FakeClock(NOW), lines.append)
            await watch()
            taken = proxy.rules["unmake"].action
            path.write_text(json.dumps(small_policy(unmake={"policy": "pass"}), indent=2))  # same policy, respelled
            await watch()
    assert taken == "pass" and len(lines) == 1  # the respelling is no change


async def test_HATP_PXY_73_shadowed_spends_add_up_in_a_shadow_ledger_until_the_budget_would_be_exceeded(
    tmp_path: Path,
) -> None:
    server, made = upstream()
    gate = shadow_gate(tmp_path, load_policy(policy_doc()).budgets)  # 30 USD an hour; a call 10
    log = ShadowLog(":memory:")
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = await shadowing(client, gate, log)
            for a in (10, 10, 10, 10, 5):
                assert not (await proxy.handle(None, call("pay", a=a))).is_error
    assert made == {"paid 10", "paid 5"}  # every shadowed call reached the upstream
    got = [(e["rule"], e["code"]) for e in log.entries()]
    assert got == [
        ("HATP-PXY-21", "APPROVAL_NEEDED"),
        ("HATP-PXY-21", "APPROVAL_NEEDED"),
        ("HATP-PXY-21", "APPROVAL_NEEDED"),
        ("HATP-PXY-23", "BUDGET_EXCEEDED"),  # the fourth 10 would take the shadowed spends past 30
        ("HATP-PXY-23", "BUDGET_EXCEEDED"),
    ]
    since = parse_ts("2026-12-05T03:00:00Z")
    assert gate.ledger.spent(gate.agent, "USD", since) == 0  # nothing reserved in the real ledger
    assert gate.shadow_ledger is not None
    assert gate.shadow_ledger.spent(gate.agent, "USD", since) == 30
    gate.ledger.close()
    gate.shadow_ledger.close()


async def test_HATP_PXY_73_a_shadow_ledger_that_cannot_be_written_refuses_the_call_and_sends_nothing(
    tmp_path: Path,
) -> None:
    server, made = upstream()
    gate = shadow_gate(tmp_path, load_policy(policy_doc()).budgets)
    assert gate.shadow_ledger is not None
    gate.shadow_ledger.close()  # every read and write of it now fails
    with anyio.fail_after(10):
        async with Client(server) as client:
            proxy = await shadowing(client, gate, ShadowLog(":memory:"))
            refused = refusal(await proxy.handle(None, call("pay", a=5)))
    gate.ledger.close()
    assert (refused["rule"], refused["code"]) == ("HATP-PXY-40", "SHADOW_LOG_UNWRITABLE")
    assert made == set()  # nothing reached the upstream

"""The proxy's binding in memory: its lookup built from the policy file, and the legacy undo map as a policy
(hatp_mcp/mcp/journal_proxy.py, spec/proxy.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from hatp_mcp.core.journal.events import SagaStatus
from hatp_mcp.core.journal.undo_map import UndoMap
from hatp_mcp.core.model.proxy_policy import HttpUpstream, load_policy
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.journal_proxy import OUTSIDE_SAGA, RECOVERY_POLICY, JournalingProxy
from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.runtime.journal.undoable import DidNotHappen, Happened
from hatp_mcp.store.journal_store import MemoryJournalStore, SqliteJournalStore

pytestmark = pytest.mark.anyio


def upstream() -> tuple[MCPServer, set[str]]:
    made: set[str] = set()
    server = MCPServer("upstream", log_level="WARNING")

    @server.tool()
    def make(name: str) -> dict[str, Any]:
        made.add(name)
        return {"id": name}

    @server.tool()
    def unmake(id: str) -> dict[str, Any]:
        made.discard(id)
        return {"id": id}

    @server.tool()
    def find(name: str) -> dict[str, Any]:
        return {"found": name in made}

    return server, made


POLICY = {
    "upstream": {"url": "http://127.0.0.1:9/mcp"},
    "tools": {
        "make": {
            "policy": "journal",
            "undo": {"tool": "unmake", "arguments": {"id": "result.id"}},
            "lookup": {"tool": "find", "arguments": {"name": "args.name"}, "happened": "result.found"},
        }
    },
}


def journal() -> Journal:
    return Journal(MemoryJournalStore(), SigningKey.generate(["journal"]))


async def test_a_lookup_from_the_policy_file_tells_whether_a_lost_call_happened_HATP_PXY_3() -> None:
    server, made = upstream()
    with anyio.fail_after(10):
        async with Client(server) as client:
            j = journal()
            JournalingProxy(client, (await client.list_tools()).tools, j, load_policy(POLICY))
            look = j.tool("make").lookup
            assert look is not None
            absent = await look({"name": "a"}, "k1")
            made.add("a")
            found = await look({"name": "a"}, "k1")
    assert isinstance(absent, DidNotHappen) and isinstance(found, Happened)


async def test_a_policy_that_does_not_fit_the_upstream_registers_nothing_HATP_PXY_4() -> None:
    server, _ = upstream()
    bad = {**POLICY, "tools": {"make": {**POLICY["tools"]["make"], "undo": {"tool": "remove"}}}}
    with anyio.fail_after(10):
        async with Client(server) as client:
            j = journal()
            with pytest.raises(HatpError) as err:
                JournalingProxy(client, (await client.list_tools()).tools, j, load_policy(bad))
    assert (err.value.rule, err.value.path) == ("HATP-PXY-4", "tools.make.undo.tool")
    with pytest.raises(HatpError):
        j.tool("make")


def test_the_legacy_undo_map_becomes_the_same_proxy_as_a_policy_HATP_JRN_14() -> None:
    undo_map = UndoMap.parse(
        {
            "tools": {
                "refund": {"undo": "reverse", "arguments": {"item": "/args/item"}, "constants": {"why": "undo"}},
                "ship": {"pivot": True},
            }
        }
    )
    policy = undo_map.policy(HttpUpstream(url="http://127.0.0.1:9/mcp"))
    assert policy.default == "irreversible" and policy.tools["ship"].policy == "irreversible"
    undo = policy.tools["refund"].undo
    assert undo is not None and undo.tool == "reverse"
    assert undo.arguments == {"item": '"args"."item"', "why": '`"undo"`'}


def restarted(store: MemoryJournalStore, key: SigningKey) -> Journal:
    """The journal a restarted proxy opens on the same store (servers/journal_proxy.py)."""
    return Journal(store, key, policy=RECOVERY_POLICY)


async def test_HATP_PXY_9_a_restart_undoes_nothing_and_offers_the_open_saga_for_completion_or_rollback() -> None:
    server, made = upstream()
    store, key = MemoryJournalStore(), SigningKey.generate(["journal"])
    with anyio.fail_after(20):
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            first = JournalingProxy(client, tools, restarted(store, key), load_policy(POLICY))
            async with Client(first.server()) as model:
                outside = await model.call_tool("make", {"name": "outside"})  # no saga: it stands
                begun = (await model.call_tool("saga_begin", {"name": "trip"})).structured_content
                await model.call_tool("make", {"name": "a"})
                await model.call_tool("make", {"name": "b"})
            lost = await first.journal.begin(OUTSIDE_SAGA)  # a call outside a saga, its answer lost in the crash
            await lost.add_step("make", {"name": "lost"})
            made.add("lost")
            # the process is gone; another opens the same store
            journal = restarted(store, key)
            second = JournalingProxy(client, tools, journal, load_policy(POLICY))
            await journal.recover()
            reopened = await second.reopen()
            after_restart = set(made)
            async with Client(second.server()) as model:
                status = (await model.call_tool("saga_status", {})).structured_content
                lost_status = (await model.call_tool("saga_status", {"saga_id": lost.id})).structured_content
                done = (await model.call_tool("saga_rollback", {"reason": "not wanted"})).structured_content
    assert not outside.is_error and begun is not None and status is not None and done is not None
    assert after_restart == {"outside", "a", "b", "lost"}  # nothing undone on its own
    assert reopened[begun["sagaId"]] is SagaStatus.IN_PROGRESS and reopened[lost.id] is SagaStatus.COMPLETED
    assert status["sagaId"] == begun["sagaId"] and status["status"] == "IN_PROGRESS" and status["recovered"]
    assert "saga_rollback" in status["next"] and [s["state"] for s in status["steps"]] == ["COMPLETED"] * 2
    assert lost_status is not None and lost_status["status"] == "COMPLETED" and lost_status["recovered"]
    assert done["status"] == "ROLLED_BACK" and made == {"outside", "lost"}  # only the saga's own calls undone


async def test_HATP_PXY_9_a_call_outside_a_saga_is_never_rolled_back_by_a_later_rollback() -> None:
    server, made = upstream()
    with anyio.fail_after(20):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(POLICY))
            async with Client(proxy.server()) as model:
                await model.call_tool("make", {"name": "standing"})
                refused = await model.call_tool("saga_rollback", {})
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["refusal"]["code"] == "NO_SAGA" and made == {"standing"}


async def test_HATP_PXY_10_every_saga_tools_failure_is_an_error_result_naming_the_rule_and_the_fix() -> None:
    server, _ = upstream()
    with anyio.fail_after(20):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(POLICY))
            async with Client(proxy.server()) as model:
                answers = {
                    "complete-none": await model.call_tool("saga_complete", {}),
                    "status-none": await model.call_tool("saga_status", {}),
                    "status-unknown": await model.call_tool("saga_status", {"saga_id": "saga-nope"}),
                    "begin-unnamed": await model.call_tool("saga_begin", {}),
                }
                await model.call_tool("saga_begin", {"name": "one"})
                answers["begin-twice"] = await model.call_tool("saga_begin", {"name": "two"})
                ended = (await model.call_tool("saga_complete", {})).structured_content
                assert ended is not None
                answers["rollback-ended"] = await model.call_tool("saga_rollback", {"saga_id": ended["sagaId"]})
    for case, answer in answers.items():
        assert answer.is_error, case
        assert answer.structured_content is not None, case
        refusal = answer.structured_content["refusal"]
        assert refusal["rule"] == "HATP-PXY-10" and refusal.get("fix"), (case, refusal)


async def test_HATP_PXY_10_a_journaled_call_the_journal_refuses_is_an_error_result_and_leaves_no_saga_open() -> None:
    server, made = upstream()
    with anyio.fail_after(20):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(POLICY))
            async with Client(proxy.server()) as model:
                refused = await model.call_tool("make", {"name": 1.5})  # a float: no canonical form (HATP-CANON-2)
            still_open = await proxy.journal.store.unfinished()
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["refusal"]["rule"] == "HATP-CANON-2" and made == set()
    assert still_open == []


async def test_HATP_PXY_9_an_in_doubt_step_without_a_lookup_stays_in_doubt_until_a_rollback_dead_letters_it() -> None:
    server, made = upstream()
    store, key = MemoryJournalStore(), SigningKey.generate(["journal"])
    no_lookup = {**POLICY, "tools": {"make": {k: v for k, v in POLICY["tools"]["make"].items() if k != "lookup"}}}
    with anyio.fail_after(20):
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            first = JournalingProxy(client, tools, restarted(store, key), load_policy(no_lookup))
            async with Client(first.server()) as model:
                await model.call_tool("saga_begin", {"name": "trip"})
                await model.call_tool("make", {"name": "a"})
            assert first.current is not None
            await first.current.add_step("make", {"name": "lost"})  # its answer lost in the crash
            made.add("lost")
            journal = restarted(store, key)
            second = JournalingProxy(client, tools, journal, load_policy(no_lookup))
            await journal.recover()
            await second.reopen()
            async with Client(second.server()) as model:
                status = (await model.call_tool("saga_status", {})).structured_content
                refused = await model.call_tool("saga_complete", {})
                done = (await model.call_tool("saga_rollback", {})).structured_content
    assert status is not None and [s["state"] for s in status["steps"]] == ["COMPLETED", "IN_DOUBT"]
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["refusal"]["code"] == "STEPS_OPEN"  # no guess: it does not complete
    assert done is not None and done["status"] == "ROLLBACK_FAILED"
    assert [d["stepId"] for d in done["deadLetters"]] == ["s2"] and made == {"lost"}  # a undone, lost left to a person


async def test_HATP_JRN_25_a_call_outside_any_saga_is_journaled_in_two_durable_writes(tmp_path: Path) -> None:
    """Its saga of its own (HATP-PXY-9) begins in its step's write and ends in its result's: two fsynced commits, as
    a call inside a saga takes, not four; a failed call's saga of its own ends the same way."""
    server, made = upstream()

    @server.tool()
    def spoil(name: str) -> dict[str, Any]:
        raise ToolError(f"{name} is spoilt")  # an isError result, the upstream's own refusal

    policy = {**POLICY, "tools": {**POLICY["tools"], "spoil": {"policy": "irreversible"}}}
    store = SqliteJournalStore(tmp_path / "journal.db")
    writes: dict[str, int] = {}
    try:
        with anyio.fail_after(20):
            async with Client(server) as client:
                j = Journal(store, SigningKey.generate(["journal"]), policy=RECOVERY_POLICY)
                proxy = JournalingProxy(client, (await client.list_tools()).tools, j, load_policy(policy))
                async with Client(proxy.server()) as model:
                    for case, tool, name in (("outside", "make", "a"), ("failed", "spoil", "b")):
                        before = store.appends
                        await model.call_tool(tool, {"name": name})
                        writes[case] = store.appends - before
                    await model.call_tool("saga_begin", {"name": "inside"})
                    before = store.appends
                    await model.call_tool("make", {"name": "c"})
                    writes["inside"] = store.appends - before
        stored = [await store.load(sid) for sid in await store.sagas()]
    finally:
        store.close()
    assert writes == {"outside": 2, "failed": 2, "inside": 2} and made == {"a", "c"}
    own = [s for s in stored if s is not None and s.name == OUTSIDE_SAGA]
    assert sorted([e["event"] for e in s.events] for s in own) == [
        ["saga.begin", "step.started", "step.completed", "saga.closed"],
        ["saga.begin", "step.started", "step.failed", "saga.closed"],
    ]


async def test_HATP_CANON_2_arguments_nested_past_any_bound_are_refused_and_nothing_is_journaled_or_sent() -> None:
    """An agent's arguments nested 100,000 deep (in process: a transport's parser would stop them sooner) are
    refused by name before anything is written: no saga of its own is begun, the upstream is never called."""
    server, made = upstream()
    name: object = "x"
    for _ in range(100_000):
        name = {"a": name}
    with anyio.fail_after(20):
        async with Client(server) as client:
            proxy = JournalingProxy(client, (await client.list_tools()).tools, journal(), load_policy(POLICY))
            refused = await proxy.handle(None, types.CallToolRequestParams(name="make", arguments={"name": name}))
            sagas = await proxy.journal.store.sagas()
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["refusal"]["rule"] == "HATP-CANON-2"
    assert sagas == [] and made == set()

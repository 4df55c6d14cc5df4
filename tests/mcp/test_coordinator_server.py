"""serve_coordinator in memory: hatp/txn/{begin,status,abort}, the agent tools, refusals on the wire."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError
from mcp.server import MCPServer

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import HatpRequest, call_raw
from hatp_mcp.mcp.coordinator_server import COORDINATOR_TOOLS, PROGRESS_SECONDS, RECORD_URI, serve_coordinator
from hatp_mcp.mcp.extension import HatpSettings, read_advertisement
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.scripted_approver import HumanScript
from hatp_mcp.runtime.coordinator.service import TxnService

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def coordinator(world: World) -> AsyncIterator[Client]:
    svc = TxnService(
        key=world.keys["coordinator"],
        keyring=world.keyring,
        participants=world.participants,
        approver=world.approver,
        log=world.log,
        clock=world.clock,
    )
    server = MCPServer("hatp-coordinator-test")
    serve_coordinator(server, svc, HatpSettings(roles=["coordinator"], keys=[world.keys["coordinator"].public_jwk()]))
    async with svc.running(), Client(server) as client:
        yield client


def invalid_plan(clock: FakeClock, txn_id: str) -> dict[str, Any]:
    data = trip_plan(clock.now(), txn_id).wire()
    data["branches"][0]["amount"] = {"value": "-5.00", "currency": "USD"}
    return data


async def test_HATP_MCP_1_the_coordinator_advertises_hatp_with_its_role_and_key(clock: FakeClock) -> None:
    world = build_world(clock)
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            hatp = read_advertisement(client.server_capabilities)
            tools = {t.name for t in (await client.list_tools()).tools}
    assert hatp["roles"] == ["coordinator"] and hatp["keys"] == [world.keys["coordinator"].public_jwk()]
    assert set(COORDINATOR_TOOLS) <= tools


async def test_HATP_MCP_20_begin_over_mcp_answers_a_status_and_the_transaction_commits_in_the_background(
    clock: FakeClock,
) -> None:
    world = build_world(clock)
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            begun = await call_raw(client, "hatp/txn/begin", trip_plan(clock.now(), "txn-m1").wire(), 5)
            told = await call_raw(client, "hatp/txn/status", {"txnId": "txn-m1", "waitSeconds": 5}, 10)
            # told the outcome (HATP-MCP-65); a second wait is for the closed record (HATP-MCP-66)
            done = await call_raw(client, "hatp/txn/status", {"txnId": "txn-m1", "waitSeconds": 5}, 10)
    assert begun["type"] == "hatp.txn-status" and "outcome" not in begun and "record" not in begun
    assert told["outcome"] == "COMMITTED"
    assert (done["state"], done["outcome"]) == ("committed", "COMMITTED")
    assert verify_record(done["record"], world.keyring) == []


async def test_HATP_MCP_20_an_invalid_plan_is_refused_on_the_wire_with_its_violations(clock: FakeClock) -> None:
    world = build_world(clock)
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            with pytest.raises(HatpError) as info:
                await call_raw(client, "hatp/txn/begin", invalid_plan(clock, "txn-m2"), 5)
            with pytest.raises(HatpError) as unknown:
                await call_raw(client, "hatp/txn/status", {"txnId": "txn-m2"}, 5)
    assert (info.value.rule, info.value.code) == ("HATP-TXN-1", "PLAN_INVALID")
    assert info.value.data is not None and info.value.data["violations"]
    assert unknown.value.code == "UNKNOWN_TXN" and await world.log.load("txn-m2") is None


async def test_HATP_MCP_2_begin_params_that_are_not_a_plan_are_invalid_params(clock: FakeClock) -> None:
    world = build_world(clock)
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            with pytest.raises(MCPError) as info:
                await client.session.send_request(
                    HatpRequest(method="hatp/txn/begin", params={"txnId": "txn-m3"}), types.EmptyResult
                )
    assert info.value.code == -32602 and info.value.error.data["rule"] == "HATP-OBJ-3"


async def test_HATP_MCP_22_status_of_an_unknown_txn_is_refused_with_its_stable_code(clock: FakeClock) -> None:
    with anyio.fail_after(10):
        async with coordinator(build_world(clock)) as client:
            with pytest.raises(HatpError) as info:
                await call_raw(client, "hatp/txn/status", {"txnId": "txn-none"}, 5)
    assert (info.value.rule, info.value.code) == ("HATP-MCP-22", "UNKNOWN_TXN")


async def test_HATP_MCP_23_abort_over_mcp_ends_an_undecided_transaction_aborted(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=3600)})
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            await call_raw(client, "hatp/txn/begin", trip_plan(clock.now(), "txn-m4").wire(), 5)
            await anyio.wait_all_tasks_blocked()
            aborted = await call_raw(client, "hatp/txn/abort", {"txnId": "txn-m4", "reason": "no longer needed"}, 5)
            done = await call_raw(client, "hatp/txn/status", {"txnId": "txn-m4", "waitSeconds": 5}, 10)
    assert aborted["decision"] == "abort" and done["outcome"] == "ABORTED"
    assert world.seat.effects == ["hold txn-m4", "release txn-m4"]


async def test_HATP_MCP_25_the_agent_tools_answer_the_same_wire_objects_and_refusals(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=3600)})
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            begun = await client.call_tool("begin_transaction", {"plan": trip_plan(clock.now(), "txn-t1").wire()})
            await anyio.wait_all_tasks_blocked()
            pending = await client.call_tool("list_pending", {})
            status = await client.call_tool("transaction_status", {"txn_id": "txn-t1"})
            aborted = await client.call_tool("abort_transaction", {"txn_id": "txn-t1", "reason": "test"})
            refused = await client.call_tool("begin_transaction", {"plan": invalid_plan(clock, "txn-t2")})
            unknown = await client.call_tool("transaction_status", {"txn_id": "txn-none"})
    assert begun.structured_content is not None and begun.structured_content["type"] == "hatp.txn-status"
    assert pending.structured_content is not None
    assert [t["txnId"] for t in pending.structured_content["txns"]] == ["txn-t1"]
    assert status.structured_content is not None and status.structured_content["state"] == "approving"
    assert aborted.structured_content is not None and aborted.structured_content["decision"] == "abort"
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["refusal"]["rule"] == "HATP-TXN-1"
    assert unknown.is_error and unknown.structured_content == {
        "refusal": {
            "rule": "HATP-MCP-22",
            "code": "UNKNOWN_TXN",
            "reason": unknown.structured_content["refusal"]["reason"],
            **{k: v for k, v in unknown.structured_content["refusal"].items() if k in ("path", "fix")},
        }
    }
    assert text_of(unknown).startswith("UNKNOWN_TXN: refused under HATP-MCP-22")
    assert "txn-none" in text_of(unknown)


def text_of(result: types.CallToolResult) -> str:
    """What a model reads of a tool result: its text, never `data` or structured content."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


_PROBLEM = re.compile(r"^- (HATP-[A-Z]+-\d+|schema) at (\S+): (.+)$")


def follow(text: str, plan: dict[str, Any], shift: timedelta) -> dict[str, Any]:
    """A model that fixes a plan from the refusal's text alone: each time a HATP-VAL-9 line names (a deadline in
    the past, an expired mandate), at the path the line names, moved forward by `shift`."""
    fixed = copy.deepcopy(plan)
    for line in text.splitlines():
        m = _PROBLEM.match(line)
        if m is None or m.group(1) != "HATP-VAL-9":
            continue
        *parents, leaf = re.findall(r"[A-Za-z]+|\d+", m.group(2))
        node: Any = fixed
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[leaf] = format_ts(parse_ts(node[leaf]) + shift)
    return fixed


async def test_HATP_MCP_25_a_model_reading_only_the_tool_result_text_fixes_an_invalid_plan(clock: FakeClock) -> None:
    world = build_world(clock)
    stale = trip_plan(clock.now() - timedelta(days=3), "txn-fix").wire()  # as demo/plans/trip.json went stale
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            refused = await client.call_tool("begin_transaction", {"plan": stale})
            again = await client.call_tool(
                "begin_transaction", {"plan": follow(text_of(refused), stale, timedelta(days=3))}
            )
    assert refused.is_error and refused.structured_content is not None
    violations = refused.structured_content["refusal"]["data"]["violations"]
    assert {v["rule"] for v in violations} == {"HATP-VAL-9"} and len(violations) == 4
    for v in violations:  # each one's rule, path and fix, in the text the model reads
        assert f"- {v['rule']} at {v['path']}: {v['message']}" in text_of(refused).splitlines()
    assert not again.is_error, text_of(again)
    assert again.structured_content is not None and again.structured_content["txnId"] == "txn-fix"


async def test_HATP_MCP_25_a_plan_that_is_not_a_plan_lists_every_schema_error_with_its_fix(clock: FakeClock) -> None:
    plan = trip_plan(clock.now(), "txn-bad").wire()
    del plan["requester"]
    plan["branches"][0]["tier"] = "maybe"
    with anyio.fail_after(10):
        async with coordinator(build_world(clock)) as client:
            refused = await client.call_tool("begin_transaction", {"plan": plan})
    lines = text_of(refused).splitlines()
    assert refused.is_error and lines[0].startswith("HATP-OBJ-3: refused under HATP-OBJ-3 at ")
    assert "- HATP-OBJ-3 at requester: requester is required and missing. Add requester." in lines
    assert any(x.startswith("- HATP-OBJ-3 at branches[0].tier: ") and "Make branches[0].tier match" in x for x in lines)


async def test_HATP_VAL_14_a_model_gets_schema_errors_and_rule_violations_of_a_plan_in_one_round(
    clock: FakeClock,
) -> None:
    plan = trip_plan(clock.now() - timedelta(days=3), "txn-round").wire()  # stale: HATP-VAL-9 deadlines
    plan["branches"][0]["leaseSeconds"] = "fifteen minutes"  # and a schema error
    with anyio.fail_after(10):
        async with coordinator(build_world(clock)) as client:
            refused = await client.call_tool("begin_transaction", {"plan": plan})
    lines = text_of(refused).splitlines()
    assert refused.is_error and lines[0].startswith("HATP-OBJ-3: refused under HATP-OBJ-3 at branches[0].leaseSeconds")
    assert any(x.startswith("- HATP-OBJ-3 at branches[0].leaseSeconds: ") for x in lines)
    assert any(x.startswith("- HATP-VAL-9 at deadlines.decideBy: ") for x in lines)
    assert "spec/" not in text_of(refused) and "hatp_mcp/" not in text_of(refused)


async def test_HATP_MCP_32_a_long_status_wait_sends_progress_while_it_waits(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=600)})
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    with anyio.fail_after(10):
        async with coordinator(world) as client:
            await client.call_tool("begin_transaction", {"plan": trip_plan(clock.now(), "txn-p1").wire()})
            done: list[types.CallToolResult] = []

            async def wait() -> None:
                args = {"txn_id": "txn-p1", "wait_seconds": 300}
                done.append(await client.call_tool("transaction_status", args, progress_callback=progress))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                for _ in range(2):  # two beats of the coordinator's clock while the finance approver thinks
                    clock.advance(PROGRESS_SECONDS)
                    await anyio.wait_all_tasks_blocked()
                assert [v for v, _t, _m in seen] == [PROGRESS_SECONDS, 2 * PROGRESS_SECONDS] and not done
                clock.advance(600)  # the approver decides; the trip commits and the wait answers
    (result,) = done
    assert result.structured_content is not None and result.structured_content["outcome"] == "COMMITTED"
    assert all(total == 300 and message for _v, total, message in seen)


async def test_HATP_MCP_32_a_closed_status_is_a_short_summary_and_the_record_is_a_resource(clock: FakeClock) -> None:
    world = build_world(clock)
    world.room.sold_out = True
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            await client.call_tool("begin_transaction", {"plan": trip_plan(clock.now(), "txn-s1").wire()})
            short = await client.call_tool("transaction_status", {"txn_id": "txn-s1", "wait_seconds": 5})
            whole = await client.call_tool("transaction_status", {"txn_id": "txn-s1", "include_record": True})
            read = await client.read_resource("hatp://txn/txn-s1/record", cache_mode="bypass")
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    summary = short.structured_content
    assert summary is not None and "record" not in summary and summary["recordUri"] == "hatp://txn/txn-s1/record"
    assert summary["outcome"] == "ABORTED" and summary["decisionReason"] == "SOLD_OUT: room voted no"
    assert summary["firstRefusal"] == {
        "branchId": "room",
        "event": "vote",
        "code": "SOLD_OUT",
        "reason": "no room left",
    }
    assert {r["branchId"]: r["result"] for r in summary["results"]} == {
        "seat": "released",
        "room": "refused",
        "event": "not-committed",
        "pay": "not-committed",
        "finance": "approved",
    }
    assert len(text_of(short)) < 4000 < len(text_of(whole))
    (item,) = read.contents
    assert isinstance(item, types.TextResourceContents)
    record = json.loads(item.text)
    assert whole.structured_content is not None and whole.structured_content["record"] == record
    assert summary["recordDigest"] == digest(record) and verify_record(record, world.keyring) == []
    assert RECORD_URI in templates


async def test_HATP_MCP_32_the_record_of_an_open_or_unknown_transaction_is_refused(clock: FakeClock) -> None:
    world = build_world(clock, scripts={"finance": HumanScript("approve", after_seconds=3600)})
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            await client.call_tool("begin_transaction", {"plan": trip_plan(clock.now(), "txn-s2").wire()})
            with pytest.raises(MCPError) as open_one:
                await client.read_resource("hatp://txn/txn-s2/record", cache_mode="bypass")
            with pytest.raises(MCPError) as unknown:
                await client.read_resource("hatp://txn/txn-none/record", cache_mode="bypass")
    assert open_one.value.message.startswith("NOT_CLOSED: refused under HATP-MCP-32")
    assert unknown.value.message.startswith("UNKNOWN_TXN: refused under HATP-MCP-22")


async def test_HATP_MCP_32_a_waiting_status_of_an_unknown_txn_answers_the_same_refusal_as_without_the_wait(
    clock: FakeClock,
) -> None:
    with anyio.fail_after(10):
        async with coordinator(build_world(clock)) as client:
            at_once = await client.call_tool("transaction_status", {"txn_id": "txn-none"})
            waiting = await client.call_tool("transaction_status", {"txn_id": "txn-none", "wait_seconds": 30})
    assert at_once.is_error and waiting.is_error
    assert waiting.structured_content == at_once.structured_content  # the rule, code, path and fix, not a bare error
    assert text_of(waiting).startswith("UNKNOWN_TXN: refused under HATP-MCP-22")

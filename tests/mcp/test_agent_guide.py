"""What a coordinator tells an agent: the Plan schema on begin_transaction, described and bounded parameters,
clean descriptions, an example plan made at read time and the planning prompt (hatp_mcp/mcp/agent_guide.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.server import MCPServer

from demo.trip_world import build_world
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.validator import validate
from hatp_mcp.mcp.agent_guide import EXAMPLE_PLAN_URI, PROMPT_NAME, describe, plan_schema
from hatp_mcp.mcp.coordinator_server import COORDINATOR_TOOLS
from hatp_mcp.mcp.gateway_questions import QUESTION_TOOLS, serve_gateway_questions
from hatp_mcp.mcp.gateway_tools import GATEWAY_TOOLS, add_gateway_tools
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.service import MAX_WAIT_SECONDS
from tests.mcp.gateway_fixture import make_gateway
from tests.mcp.test_coordinator_server import coordinator, text_of

pytestmark = pytest.mark.anyio

SCHEMAS = Path(__file__).resolve().parents[2] / "spec" / "schemas"


def resolved(node: Any, defs: dict[str, Any]) -> Any:
    """The generated schema file with its $refs replaced by what they name (an independent inliner)."""
    if isinstance(node, dict):
        if "$ref" in node:
            target = resolved(defs[node["$ref"].split("/")[-1]], defs)
            return {**target, **{k: resolved(v, defs) for k, v in node.items() if k != "$ref"}}
        return {k: resolved(v, defs) for k, v in node.items() if k not in ("$defs", "$schema", "$id")}
    if isinstance(node, list):
        return [resolved(v, defs) for v in node]
    return node


def properties(schema: Any, where: str = "$") -> list[tuple[str, dict[str, Any]]]:
    """Every object property in a schema, nested ones and those under anyOf / items included."""
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(schema, dict):
        for name, prop in schema.get("properties", {}).items():
            out.append((f"{where}.{name}", prop))
            out.extend(properties(prop, f"{where}.{name}"))
        for key in ("anyOf", "items", "additionalProperties"):
            sub = schema.get(key)
            for s in sub if isinstance(sub, list) else [sub]:
                out.extend(properties(s, where))
    return out


def test_HATP_MCP_30_the_published_plan_schema_is_the_generated_one_with_its_references_inlined() -> None:
    generated = json.loads((SCHEMAS / "plan.schema.json").read_text())
    assert plan_schema() == resolved(generated, generated["$defs"])
    assert "$ref" not in json.dumps(plan_schema())


def test_every_plan_member_is_described_and_the_formats_are_stated() -> None:
    schema = plan_schema()
    missing = [path for path, prop in properties(schema) if "description" not in prop]
    assert missing == []
    created = schema["properties"]["createdAt"]
    assert created["format"] == "date-time" and created["pattern"].endswith("Z$")
    value = schema["properties"]["mandate"]["anyOf"][0]["properties"]["maxSpend"]["items"]["properties"]["value"]
    assert value["type"] == "string" and "12.50" in value["description"]


async def test_HATP_MCP_30_every_tool_parameter_is_described_and_bounded_and_descriptions_are_clean_text(
    clock: FakeClock, tmp_path: Path
) -> None:
    gateway = MCPServer("gw")
    approver = make_gateway(tmp_path, clock)
    add_gateway_tools(gateway, approver)
    serve_gateway_questions(gateway, approver)
    with anyio.fail_after(10):
        async with coordinator(build_world(clock)) as client, Client(gateway) as gw:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            tools |= {t.name: t for t in (await gw.list_tools()).tools}
    assert set(COORDINATOR_TOOLS) | set(GATEWAY_TOOLS) | set(QUESTION_TOOLS) <= set(tools)
    plan = tools["begin_transaction"].input_schema["properties"]["plan"]
    assert {k: v for k, v in plan.items() if k != "description"} == {
        k: v for k, v in plan_schema().items() if k != "description"
    }
    assert "hatp://examples/trip-plan" in plan["description"]
    wait = tools["transaction_status"].input_schema["properties"]["wait_seconds"]
    assert (wait["minimum"], wait["maximum"]) == (0, MAX_WAIT_SECONDS) and "60 s" in wait["description"]
    for tool in tools.values():
        assert tool.description and "\n " not in tool.description and "  " not in tool.description, tool.name
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name}"


def test_a_docstring_becomes_one_line_per_paragraph_and_item() -> None:
    def tool() -> None:
        """First line
        goes on.

        - one item
          continued
        - two"""

    assert describe(tool) == "First line goes on.\n\n- one item continued\n- two"


async def test_HATP_MCP_30_the_example_plan_resource_is_made_at_read_time_and_is_valid_then(clock: FakeClock) -> None:
    world = build_world(clock)
    with anyio.fail_after(10):
        async with coordinator(world) as client:
            listed = [str(r.uri) for r in (await client.list_resources()).resources]
            first = await client.read_resource(EXAMPLE_PLAN_URI, cache_mode="bypass")
            clock.advance(3 * 86400)  # three days on: a kept file would be stale by now
            later = await client.read_resource(EXAMPLE_PLAN_URI, cache_mode="bypass")
            begun = await client.call_tool("begin_transaction", {"plan": json.loads(contents(later))})
    assert EXAMPLE_PLAN_URI in listed
    one, two = Plan.model_validate(json.loads(contents(first))), Plan.model_validate(json.loads(contents(later)))
    assert one.txn_id != two.txn_id and two.created_at == "2026-12-02T10:00:00Z"
    assert validate(two, clock.now()) == [] and validate(one, clock.now()) != []
    assert not begun.is_error, text_of(begun)


def contents(result: types.ReadResourceResult) -> str:
    (item,) = result.contents
    assert isinstance(item, types.TextResourceContents) and item.mime_type == "application/json"
    return item.text


async def test_HATP_MCP_30_the_planning_prompt_states_the_tiers_and_the_one_final_rule(clock: FakeClock) -> None:
    with anyio.fail_after(10):
        async with coordinator(build_world(clock)) as client:
            names = [p.name for p in (await client.list_prompts()).prompts]
            got = await client.get_prompt(PROMPT_NAME)
    (message,) = got.messages
    assert PROMPT_NAME in names and isinstance(message.content, types.TextContent)
    text = message.content.text
    assert all(f"- {tier}:" in text for tier in ("hold", "compensate", "final"))
    assert "At most ONE final branch" in text and EXAMPLE_PLAN_URI in text and len(text.splitlines()) <= 20

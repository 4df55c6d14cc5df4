"""HatpServer: an agent tool's arguments outside its input schema are refused under HATP-MCP-50, as a tool result
that names every problem, and nothing runs (found by the agent-tools fuzz target: the SDK answered with its own
pydantic text and ran calls whose unknown arguments it dropped)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult

from hatp_mcp.mcp.errors import CODES
from hatp_mcp.mcp.hatp_server import HatpServer
from servers import airline
from servers._participant import build

pytestmark = pytest.mark.anyio


def refusal(result: CallToolResult) -> tuple[dict[str, Any], str]:
    assert result.is_error and result.structured_content is not None
    text = " ".join(getattr(c, "text", "") for c in result.content)
    return result.structured_content["refusal"], text


async def call(tmp_path: Path, tool: str, args: dict[str, Any]) -> tuple[CallToolResult, list[Any]]:
    server, _runtime, inventory = build(airline.SPEC, tmp_path, demo_tools=True)
    assert isinstance(server, HatpServer)
    try:
        with anyio.fail_after(10):
            async with Client(server) as client:
                result = await client.call_tool(tool, args)
        return result, list(inventory.all())
    finally:
        inventory.close()


async def test_HATP_MCP_50_an_unknown_argument_is_refused_and_the_call_does_not_run(tmp_path: Path) -> None:
    args = {"resource": "LH123/2026-12-10/14C", "holder": "dana", "seet": "14D"}
    result, left = await call(tmp_path, "seat_book", args)
    got, text = refusal(result)
    assert (got["rule"], got["code"], got["path"]) == ("HATP-MCP-50", "BAD_ARGUMENTS", "$.seet")
    assert "'seet' is not a parameter of seat_book" in text and "resource, holder" in text
    assert left == []  # before: the SDK dropped "seet" and booked the seat


async def test_HATP_MCP_50_a_missing_and_a_mistyped_argument_are_both_named_with_their_fix(tmp_path: Path) -> None:
    result, left = await call(tmp_path, "seat_book", {"resource": 7})
    got, text = refusal(result)
    assert (got["rule"], got["code"]) == ("HATP-MCP-50", "BAD_ARGUMENTS")
    errors = got["data"]["errors"]
    assert {e["path"] for e in errors} == {"$.resource", "$.holder"}
    assert "holder is required and missing. Add holder." in text
    assert "resource is 7: Input should be a valid string" in text
    assert "Error executing tool" not in text and "errors.pydantic.dev" not in text
    assert left == []
    assert CODES["BAD_ARGUMENTS"] == -32066


async def test_arguments_that_fit_still_run_the_tool(tmp_path: Path) -> None:
    result, left = await call(tmp_path, "seat_book", {"resource": "LH123/2026-12-10/14C", "holder": "dana"})
    assert not result.is_error
    assert len(left) == 1

"""A trip begun while the organisation's gateway is down, over real processes: the coordinator (its tool servers as
stdio children) with `--gateway` on a loopback port nobody serves. What the model reads names the gateway, says
what was done and what to do, and holds no exception repr (HATP-MCP-47)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from hatp_mcp.mcp.launch import stdio_params
from tests.coordinators import trust_coordinator_dirs
from tests.e2e.coordinator_suite import GATEWAY_ARGS, PARTICIPANTS, Agent, trip, uri

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


def closed_port() -> int:
    """A loopback port that was free a moment ago and that nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_HATP_MCP_47_a_trip_begun_while_the_gateway_is_down_names_it_commits_nothing_and_says_what_to_do(
    tmp_path: Path,
) -> None:
    config = {
        "participants": {
            uri(n): {"module": f"servers.{n}", "data": str(tmp_path / n), "keys": str(tmp_path / n / "public.jwk.json")}
            for n in PARTICIPANTS
        },
    }
    (tmp_path / "suite.json").write_text(json.dumps(config))
    trust_coordinator_dirs([tmp_path / n for n in PARTICIPANTS], [tmp_path / "coordinator"])
    gateway = f"http://127.0.0.1:{closed_port()}/mcp"
    extra = ["--participants", str(tmp_path / "suite.json"), "--gateway", gateway, *GATEWAY_ARGS]
    with anyio.fail_after(90), (tmp_path / "coordinator.stderr").open("w") as errlog:
        params = stdio_params("servers.coordinator", tmp_path / "coordinator", extra)
        async with Client(stdio_client(params, errlog=errlog)) as client:
            agent = Agent(client)
            await agent.begin(trip("txn-gateway-down", "2026-12-14", "25C"))
            done = await agent.outcome("txn-gateway-down")
            shown = await client.call_tool("transaction_status", {"txn_id": "txn-gateway-down"})
    said = done["decisionReason"]
    assert done["outcome"] == "ABORTED" and said.startswith("APPROVER_FAILED")
    assert f"gateway is down: cannot reach {gateway}" in said and "nothing was sent to it" in said
    assert "hatp serve" in said  # what to do
    assert all(r["result"] != "committed" for r in done["results"])  # what was done: nothing committed
    text = json.dumps(shown.structured_content or [c.model_dump() for c in shown.content])
    assert "gateway is down" in text
    assert not any(t in text for t in ("ExceptionGroup", "TaskGroup", "Error(", "<class"))

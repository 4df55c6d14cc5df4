"""The proxy's gate in process (hatp_mcp/mcp/proxy_gate.py), on a fake clock: the maximum and the budgets are
checked before anything else (HATP-PXY-22, HATP-PXY-23), a budget counts only the spends inside its window, and
a call refused afterwards (here: no approval, HATP-GATE-1) releases what it reserved. The whole path over real
processes is tests/e2e/test_proxy_gate.py."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.proxy_policy import Budget, Gate
from hatp_mcp.mcp.proxy_gate import GateSetup, ProxyGate, build_gate
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import ORG_DIR

pytestmark = pytest.mark.anyio

AGENT_KEY = ORG_DIR / "test-only-keys" / "agents" / "travel-bot.private.jwk.json"
AGENT = "agent://acme.com/travel-bot"
DEFINITION = {"name": "get-sum", "inputSchema": {"type": "object"}}
GATE = Gate(address="human://acme.com/bob", action="travel.spend", amount="args.a", currency="USD", max="1000")


def proxy_gate(tmp: Path, clock: FakeClock, limit: str = "30") -> ProxyGate:
    setup = GateSetup(org=ORG_DIR, server_id="mcp://everything.example", agent_key=AGENT_KEY)
    budgets = [Budget(currency="USD", limit=limit, window_seconds=3600)]
    gate = build_gate(setup, tmp, budgets, clock, None)
    gate.add("get-sum", GATE, DEFINITION)
    return gate


async def call(gate: ProxyGate, a: Any) -> tuple[dict[str, Any], int]:
    """The refusal of get-sum(a) and how many times the upstream was called."""
    ran: list[int] = []

    async def upstream() -> types.CallToolResult:
        ran.append(1)
        return types.CallToolResult(content=[types.TextContent(type="text", text="ran")])

    async def progress(message: str) -> None:
        raise AssertionError(f"nobody is asked here: {message}")

    result = await gate.call("get-sum", DEFINITION, {"a": a, "b": 1}, {}, upstream, progress)
    assert result.is_error and result.structured_content is not None
    refusal: dict[str, Any] = result.structured_content["refusal"]
    return refusal, len(ran)


async def test_HATP_PXY_22_a_call_above_the_gates_maximum_is_refused_before_anything(tmp_path: Path) -> None:
    gate = proxy_gate(tmp_path, FakeClock(parse_ts("2026-11-29T10:00:00Z")), limit="5000")
    refusal, ran = await call(gate, 1001)
    assert (refusal["rule"], refusal["code"], ran) == ("HATP-PXY-22", "OVER_MAXIMUM", 0)
    assert (await call(gate, 1000))[0]["rule"] == "HATP-GATE-1"  # at the maximum: an approval is needed


async def test_HATP_PXY_23_a_budget_counts_its_window_and_a_refused_call_releases_its_reservation(
    tmp_path: Path,
) -> None:
    clock = FakeClock(parse_ts("2026-11-29T10:00:00Z"))
    gate = proxy_gate(tmp_path, clock)
    gate.ledger.reserve("earlier", AGENT, "USD", Decimal(25), clock.now())
    over, ran = await call(gate, 6)
    assert (over["rule"], over["code"], over["path"], ran) == ("HATP-PXY-23", "BUDGET_EXCEEDED", "budgets[0]", 0)
    assert "spent 25 USD" in over["reason"]
    fits, ran = await call(gate, 5)  # fits; refused for want of an approval, and its 5 released again
    assert (fits["rule"], ran) == ("HATP-GATE-1", 0)
    assert gate.ledger.spent(AGENT, "USD", clock.now() - timedelta(hours=1)) == Decimal(25)
    clock.advance(3601)  # the earlier spend has left the window
    assert (await call(gate, 29))[0]["rule"] == "HATP-GATE-1"


async def test_HATP_PXY_23_spends_are_kept_across_a_restart(tmp_path: Path) -> None:
    clock = FakeClock(parse_ts("2026-11-29T10:00:00Z"))
    first = proxy_gate(tmp_path, clock)
    first.ledger.reserve("earlier", AGENT, "USD", Decimal(25), clock.now())
    first.ledger.close()
    again = proxy_gate(tmp_path, clock)
    assert (await call(again, 6))[0]["rule"] == "HATP-PXY-23"

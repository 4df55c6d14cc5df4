"""Targets and links: how a coordinator names and reaches its participants (HATP-MCP-26)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import cause
from hatp_mcp.mcp.server_links import Target, open_links

pytestmark = pytest.mark.anyio


def test_HATP_MCP_26_a_target_is_an_http_url_or_a_stdio_module_with_its_data_dir() -> None:
    assert Target.parse("http://127.0.0.1:8000/mcp") == Target(url="http://127.0.0.1:8000/mcp")
    assert Target.parse("stdio:servers.hotel:/var/hotel") == Target(module="servers.hotel", data="/var/hotel")
    assert Target.parse("stdio:servers.hotel") == Target(module="servers.hotel")
    obj = {"module": "servers.payments", "data": "/p", "args": ["--commit-delay", "2"]}
    assert Target.parse(obj) == Target(module="servers.payments", data="/p", args=("--commit-delay", "2"))
    assert Target.parse({"url": "http://x/mcp"}).describe() == "http://x/mcp"


@pytest.mark.parametrize("bad", ["ftp://x", "stdio:", "servers.hotel", {"module": "m", "args": "--x"}, {}])
def test_HATP_MCP_26_anything_else_is_not_a_target(bad: object) -> None:
    with pytest.raises(ValueError, match=r"target|args"):
        Target.parse(bad)  # type: ignore[arg-type]


async def test_HATP_MCP_26_a_server_that_cannot_be_reached_is_no_answer_not_a_refusal(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with open_links({"nobody": Target(url="http://127.0.0.1:9/mcp")}, tmp_path) as links:
            with pytest.raises(HatpError) as info:
                await links["nobody"].client()
    assert (info.value.rule, info.value.code) == ("HATP-MCP-6", "UNREACHABLE")


async def test_HATP_MCP_47_a_server_that_is_down_is_named_with_what_was_done_and_what_to_do_never_a_repr(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(20):
        async with open_links({"gateway": Target(url="http://127.0.0.1:9/mcp")}, tmp_path) as links:
            with pytest.raises(HatpError) as info:
                await links["gateway"].client()
    said = info.value.reason
    assert said.startswith("gateway is down: cannot reach http://127.0.0.1:9/mcp (c")
    assert "nothing was sent to it" in said and "hatp serve" in said
    assert not any(t in said for t in ("ExceptionGroup", "TaskGroup", "Error(", "<"))


def test_HATP_MCP_47_the_cause_of_a_group_of_transport_errors_is_its_innermost_error_in_words() -> None:
    inner = ConnectionRefusedError(111, "Connection refused")
    group = ExceptionGroup("unhandled errors in a TaskGroup", [ExceptionGroup("x", [inner])])
    assert cause(group) == "connection refused"
    assert cause(ExceptionGroup("unhandled errors in a TaskGroup", [TimeoutError()])) == "TimeoutError"
    assert cause(anyio.ClosedResourceError()) == "the connection was closed"


@pytest.mark.anyio
async def test_HATP_MCP_19_a_participants_bounds_are_asked_once_per_connection_and_operation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hatp_mcp.core.model.plan import Plan
    from hatp_mcp.mcp import participant_estimate as estimate_module
    from hatp_mcp.mcp.server_links import LinkedParticipant, Target, bounds_over_links, open_links
    from tests.factories import trip_plan_json

    asked: list[str] = []
    real = estimate_module.participant_bounds

    async def counting(client: Any, plan: Plan, branch_id: str, read_timeout: float | None = None) -> Any:
        asked.append(plan.txn_id)
        return await real(client, plan, branch_id, read_timeout)

    monkeypatch.setattr(estimate_module, "participant_bounds", counting)
    uri = "mcp://airline.example/hatp"
    with anyio.fail_after(60):
        async with open_links({uri: Target(module="servers.airline", data=str(tmp_path / "airline"))}, tmp_path) as ls:
            airline = LinkedParticipant(uri, ls[uri], Keyring())
            plan_a, plan_b = Plan.model_validate(trip_plan_json("txn-a")), Plan.model_validate(trip_plan_json("txn-b"))
            assert airline.known_bounds(plan_a, "seat") is None  # no connection yet: nothing held
            first = await airline.bounds(plan_a, "seat")
            held = bounds_over_links({uri: airline}).known(uri, plan_b, "seat")  # type: ignore[attr-defined]
            second = await airline.bounds(plan_b, "seat")
    assert asked == ["txn-a"]  # the second transaction is answered from what this connection advertised
    assert held == second  # what is held without a call is what the call answers
    assert (second.txn_id, second.branch_id, second.operation) == ("txn-b", "seat", "seat.hold")
    assert second.max_lease_seconds == first.max_lease_seconds is not None

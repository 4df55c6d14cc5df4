"""hatp/txn/estimate on a participant (HATP-MCP-19): the bounds it advertises for one branch's operation, a
missing bound left missing, and refusals for another plan, an unknown branch or an operation it does not serve."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.estimate import BoundsRequest
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.extension import HatpSettings, OperationInfo
from hatp_mcp.mcp.participant_estimate import operation_bounds, participant_bounds
from hatp_mcp.runtime.clock import FakeClock
from tests.mcp.toy import Toy, plan, toy_server

pytestmark = pytest.mark.anyio


async def test_HATP_MCP_19_a_participant_answers_the_bounds_it_advertises_for_the_branch(clock: FakeClock) -> None:
    p = plan()
    with anyio.fail_after(10):
        async with Client(toy_server(Toy(clock))) as client:
            got = await participant_bounds(client, p, "seat")
            with pytest.raises(HatpError) as other:
                await participant_bounds(client, p, "room")  # the toy serves seats only
    assert (got.operation, got.tier, got.max_lease_seconds, got.max_hold_seconds) == ("seat.hold", "hold", 900, 14400)
    assert got.max_duration_seconds is None  # never advertised: unbounded, not a default
    assert (other.value.rule, other.value.code) == ("HATP-MCP-19", "UNSUPPORTED")


def test_HATP_MCP_19_another_plan_or_a_branch_the_plan_lacks_is_refused() -> None:
    p = plan()
    settings = HatpSettings(roles=["participant"], operations={"seat.hold": OperationInfo("hold", 900, 14400, 5)})
    ok = operation_bounds(BoundsRequest(txn_id=p.txn_id, branch_id="seat", plan_digest=p.digest(), plan=p), settings)
    assert ok.max_duration_seconds == 5
    cases = [
        (BoundsRequest(txn_id=p.txn_id, branch_id="seat", plan_digest=plan("txn-x").digest(), plan=p), "PLAN_MISMATCH"),
        (BoundsRequest(txn_id=p.txn_id, branch_id="nope", plan_digest=p.digest(), plan=p), "NOT_FOUND"),
        (BoundsRequest(txn_id=p.txn_id, branch_id="pay", plan_digest=p.digest(), plan=p), "UNSUPPORTED"),
    ]
    for req, code in cases:
        with pytest.raises(HatpError) as err:
            operation_bounds(req, settings)
        assert (err.value.rule, err.value.code) == ("HATP-MCP-19", code)

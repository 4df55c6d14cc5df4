"""Offline checks of a routing record against the plan (HATP-GW-7): absent never passes, totals are recomputed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hatp_mcp.core.gateway.ask_evidence import check_routing, routing_record
from hatp_mcp.core.gateway.machine import open_approval
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.evidence import Checked
from hatp_mcp.errors import HatpError
from tests.acme_org import GATEWAY_ID, directory, plan

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def test_the_gateways_own_routing_record_checks_out_against_the_plan() -> None:
    p = plan(["1000"], tolerance="2")
    check_routing(routing_record(open_approval(p, "finance", directory(), gateway=GATEWAY_ID, now=NOW)), p)


def test_absent_on_a_plan_that_moves_money_fails_under_HATP_GW_7() -> None:
    p = plan()
    rr = routing_record(open_approval(p, "finance", directory(), gateway=GATEWAY_ID, now=NOW))
    forged = rr.model_copy(update={"checked": Checked(status="absent")})
    with pytest.raises(HatpError) as e:
        check_routing(forged, p)
    assert e.value.rule == "HATP-GW-7" and e.value.code == "AUTHORITY_NOT_CHECKED"


def test_understated_amounts_fail_under_HATP_GW_7() -> None:
    p = plan()
    rr = routing_record(open_approval(p, "finance", directory(), gateway=GATEWAY_ID, now=NOW))
    low = rr.model_copy(update={"checked": Checked(status="checked", amounts=[Amount.of(100, "USD")])})
    with pytest.raises(HatpError) as e:
        check_routing(low, p)
    assert e.value.rule == "HATP-GW-7"
    with pytest.raises(HatpError):
        check_routing(rr, plan(txn_id="txn-other"))

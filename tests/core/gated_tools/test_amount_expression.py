"""A gated call's amount found by a JMESPath expression in a currency the requirement fixes (the proxy's gate,
spec/proxy.md): read the same way by the tool server and the gateway (both call `expected_call`), and
refused, never taken as zero, when it is missing or not payable (HATP-GATE-20, HATP-GATE-23)."""

from __future__ import annotations

from typing import Any

import pytest

from hatp_mcp.core.gated_tools.checks import GateRequirement, expected_call
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.errors import HatpError

REQUIRES = {
    "address": "human://acme.com/bob",
    "requirement": {"action": "travel.spend", "amount": {"expression": "args.a", "currency": "USD"}},
}


def amount_of(args: dict[str, Any]) -> Amount | None:
    return expected_call("mcp://x", "get-sum", args, GateRequirement.from_config(REQUIRES), None).max_amount


def test_HATP_GATE_20_the_amount_expression_reads_a_number_or_a_decimal_string_in_the_fixed_currency() -> None:
    assert amount_of({"a": 5, "b": 7}) == Amount(value="5", currency="USD")
    assert amount_of({"a": "12.50"}) == Amount(value="12.50", currency="USD")
    assert GateRequirement.from_config(REQUIRES).wire() == REQUIRES


@pytest.mark.parametrize(
    ("args", "rule"),
    [
        ({"b": 7}, "HATP-GATE-20"),
        ({"a": None}, "HATP-GATE-20"),
        ({"a": True}, "HATP-GATE-20"),
        ({"a": [5]}, "HATP-GATE-20"),
        ({"a": "five"}, "HATP-GATE-20"),
        ({"a": -5}, "HATP-GATE-23"),
        ({"a": "NaN"}, "HATP-GATE-23"),
    ],
)
def test_HATP_GATE_20_an_amount_the_expression_cannot_find_or_pay_is_refused_never_zero(
    args: dict[str, Any], rule: str
) -> None:
    with pytest.raises(HatpError) as err:
        amount_of(args)
    assert err.value.rule == rule


@pytest.mark.parametrize(
    "requirement",
    [
        {"action": "a", "amount": {"expression": "args.a"}},
        {"action": "a", "amount": {"expression": "args.a", "currency": "usd"}},
        {"action": "a", "amount": {"expression": "args.[", "currency": "USD"}},
        {"action": "a", "amount": {"expression": "args.a", "currency": "USD"}, "amountFrom": "/a"},
    ],
)
def test_HATP_GATE_20_a_requirement_amount_of_the_wrong_shape_is_refused(requirement: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        GateRequirement.from_config({"address": "human://acme.com/bob", "requirement": requirement})

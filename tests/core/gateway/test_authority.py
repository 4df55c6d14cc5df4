"""Authority from the plan: totals per currency with tolerance; the agent's own figure never lowers them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.gateway.authority import card_authority_gap, check_requirement, plan_money, show_money
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.card import Authority, HumanCard
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from tests.acme_org import card_doc, plan


def test_totals_add_branches_per_currency_and_up_to_adds_the_tolerance() -> None:
    money = plan_money(plan(["1000", "500.50"], tolerance="2"))
    assert money.totals == {"USD": Decimal("1500.50")}
    assert money.up_to == {"USD": Decimal("1530.51")}
    assert show_money(money) == ["$1,500.50, up to $1,530.51"]


def test_a_requirement_below_the_plan_total_is_refused_under_HATP_GW_1() -> None:
    p = plan(["1000"], tolerance="2", max_amount="1000")
    with pytest.raises(HatpError) as e:
        check_requirement(p.approvals[0], plan_money(p), "approvals[0]")
    assert e.value.rule == "HATP-GW-1" and e.value.path == "approvals[0].maxAmount"
    assert "$1,020.00" in e.value.reason and e.value.code == "REQUIREMENT_BELOW_TOTAL"


def test_a_requirement_in_another_currency_counts_as_zero_under_HATP_GW_1() -> None:
    p = plan(["10"], max_amount="1000000")
    req = p.approvals[0].model_copy(
        update={"max_amount": p.approvals[0].max_amount.model_copy(update={"currency": "EUR"})}
    )  # type: ignore[union-attr]
    with pytest.raises(HatpError) as e:
        check_requirement(req, plan_money(p))
    assert e.value.rule == "HATP-GW-1"


def test_a_requirement_covering_the_total_with_tolerance_passes() -> None:
    p = plan(["1000"], tolerance="2", max_amount="1020")
    check_requirement(p.approvals[0], plan_money(p))


def test_branches_of_25000_and_minus_24900_are_refused_under_HATP_GW_2_not_totalled_to_100() -> None:
    with pytest.raises(HatpError) as e:
        plan_money(plan(["25000", "-24900"]))
    assert e.value.rule == "HATP-GW-2" and e.value.path == "branches[1].amount.value"


def test_a_minus_99_percent_tolerance_is_refused_under_HATP_GW_3() -> None:
    with pytest.raises(HatpError) as e:
        plan_money(plan(["25000"], tolerance="-99"))
    assert e.value.rule == "HATP-GW-3" and e.value.path == "branches[0].tolerancePercent"


def test_a_settled_branch_counts_once_at_the_larger_of_payer_and_payee() -> None:
    p = plan(["400", "1000"])
    doc = p.wire()
    doc["branches"][0]["settles"] = ["pay1"]  # a $400 payment claims to settle a $1,000 hold
    money = plan_money(Plan.model_validate(doc))
    assert money.totals == {"USD": Decimal(1000)}


def test_a_plan_without_amounts_moves_no_money() -> None:
    doc = plan(["1"]).wire()
    del doc["branches"][0]["amount"]
    money = plan_money(Plan.model_validate(doc))
    assert not money.moves_money and show_money(money) == []


@pytest.mark.parametrize(("amount", "tolerance"), [("412.50", "0.000000000000000001"), ("999999999999999999", "2")])
def test_a_ceiling_no_screen_can_state_is_refused_under_HATP_GW_3_before_anyone_is_asked(
    amount: str, tolerance: str
) -> None:
    with pytest.raises(HatpError) as e:  # it was a bare -32602 from building the screen, with no rule
        plan_money(plan([amount], tolerance=tolerance))
    assert (e.value.rule, e.value.code, e.value.path) == (
        "HATP-GW-3",
        "UNSTATABLE_CEILING",
        "branches[0].tolerancePercent",
    )
    assert "more than 18 digits" in e.value.reason


def _old_card_authority_gap(card: HumanCard, action: str, up_to: dict[str, Decimal]) -> str | None:
    """The oracle: card_authority_gap as it was, building the amounts it shows for every currency first."""
    grants = [a for a in card.authority if a.action == action]
    if not grants:
        return f"no authority for {action!r}"
    for c in sorted(up_to):
        limits = [m.decimal for g in grants for m in g.max_amount if m.currency == c]
        need = Amount.of(up_to[c], c).display()
        if not limits:
            return f"no limit in {c} for {action!r} (needs {need}; currencies are never converted)"
        if max(limits) < up_to[c]:
            return f"limit {Amount.of(max(limits), c).display()} is below {need}"
    return None


def _outcome(fn: Any, *args: Any) -> tuple[str, object]:
    try:
        return ("returned", fn(*args))
    except Exception as exc:  # the exact error, type and text, is what is compared
        return (type(exc).__name__, str(exc))


_WIRE_CURRENCIES = st.sampled_from(["USD", "EUR", "JPY"])
_VALUES = st.one_of(
    st.decimals(allow_nan=True, allow_infinity=True),  # any exponent: too many digits, NaN, sNaN, infinities
    st.decimals(min_value=0, max_value=10**6, places=2),  # the amounts a card covers or not
    st.integers(min_value=-(10**20), max_value=10**20).map(Decimal),
)
_LIMITS = st.decimals(min_value=0, max_value=10**6, places=2).map(lambda d: format(d, "f"))


@settings(max_examples=400, deadline=None)
@given(
    grants=st.lists(
        st.tuples(
            st.sampled_from(["travel.spend", "travel.book"]),
            st.lists(st.tuples(_LIMITS, _WIRE_CURRENCIES), max_size=3),
        ),
        max_size=3,
    ),
    action=st.sampled_from(["travel.spend", "travel.book"]),
    up_to=st.dictionaries(st.sampled_from(["USD", "EUR", "JPY", "usd", "US", "USDX", "GBP"]), _VALUES, max_size=3),
)
def test_card_authority_gap_equals_building_every_shown_amount_first(
    grants: list[tuple[str, list[tuple[str, str]]]], action: str, up_to: dict[str, Decimal]
) -> None:
    """The same reason, or the same error (type and text), as the old body that built each amount it shows
    before comparing: also for amounts no wire Amount holds (NaN, too many digits) and currencies it refuses."""
    authority = [Authority(action=a, max_amount=[Amount.of(v, c) for v, c in limits]) for a, limits in grants]
    card = HumanCard.model_validate(card_doc("bob")).model_copy(update={"authority": authority})
    assert _outcome(card_authority_gap, card, action, up_to) == _outcome(_old_card_authority_gap, card, action, up_to)

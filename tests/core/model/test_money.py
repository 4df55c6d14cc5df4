"""A plan's money: plan_money against the straightforward computation it replaced (kept here as the oracle), on
random settles graphs: duplicates, self-settles, unknown ids, chains, cycles, mixed currencies and amounts with
more digits than the decimal context keeps (so the order of the additions shows)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.model.amount import with_tolerance
from hatp_mcp.core.model.money import _plan_money, branch_most
from hatp_mcp.core.model.plan import Plan
from tests.factories import trip_plan_json

_ZERO = Decimal(0)


def _reference(plan: Plan) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
    """The computation as it was first written (one closure, every branch through it): the oracle."""
    own: dict[str, tuple[str, Decimal, Decimal]] = {}
    for b in plan.branches:
        if b.amount is not None:
            d = b.amount.decimal
            most = d if b.tolerance_percent is None else with_tolerance(b.amount, b.tolerance_percent)
            own[b.branch_id] = (b.amount.currency, d, most)
    by_id = {b.branch_id: b for b in plan.branches}
    settled = {s for b in plan.branches for s in b.settles if s in by_id and s != b.branch_id}
    totals: dict[str, Decimal] = {}
    up_to: dict[str, Decimal] = {}
    if not settled:
        for c, t, u in own.values():
            totals[c] = totals.get(c, _ZERO) + t
            up_to[c] = up_to.get(c, _ZERO) + u
        return totals, up_to
    done: dict[str, dict[str, tuple[Decimal, Decimal]]] = {}
    reached: set[str] = set()

    def effective(bid: str, path: frozenset[str]) -> dict[str, tuple[Decimal, Decimal]]:
        reached.add(bid)
        if bid in done:
            return done[bid]
        settles = by_id[bid].settles
        if not settles:
            o = own.get(bid)
            return {o[0]: (o[1], o[2])} if o is not None else {}
        out: dict[str, tuple[Decimal, Decimal]] = {}
        for s in settles:
            if s in by_id and s not in path:
                for c, (t, u) in effective(s, path | {s}).items():
                    pt, pu = out.get(c, (_ZERO, _ZERO))
                    out[c] = (pt + t, pu + u)
        if bid in own:
            c, t, u = own[bid]
            st, su = out.get(c, (_ZERO, _ZERO))
            out[c] = (max(t, st), max(u, su))
        done[bid] = out
        return out

    for b in plan.branches:
        if b.branch_id in settled:
            continue
        for c, (t, u) in effective(b.branch_id, frozenset({b.branch_id})).items():
            totals[c] = totals.get(c, _ZERO) + t
            up_to[c] = up_to.get(c, _ZERO) + u
    for bid, (c, t, u) in own.items():
        if bid not in reached:
            totals[c] = totals.get(c, _ZERO) + t
            up_to[c] = up_to.get(c, _ZERO) + u
    return totals, up_to


IDS = ["a", "b", "c", "d", "e"]
decimal_text = st.one_of(
    st.sampled_from(["0", "1", "412.50", "-3", "999999999999999999.999999999999999999", "0.000000000000000001"]),
    st.decimals(min_value=-(10**17), max_value=10**17, places=2, allow_nan=False, allow_infinity=False).map(str),
    st.from_regex(r"\A[1-9]\d{0,17}\.\d{1,18}\Z"),
)
branch = st.fixed_dictionaries(
    {"branchId": st.sampled_from(IDS), "settles": st.lists(st.sampled_from([*IDS, "nobody"]), max_size=3)},
    optional={
        "amount": st.fixed_dictionaries({"value": decimal_text, "currency": st.sampled_from(["USD", "EUR"])}),
        "tolerancePercent": st.sampled_from(["2", "0.5", "-1", "33.333333333333333333", "100"]),
    },
)


@settings(max_examples=400, deadline=None)
@given(st.lists(branch, min_size=1, max_size=6))
def test_plan_money_adds_up_as_the_reference_computation_does_in_every_settles_graph(
    branches: list[dict[str, Any]],
) -> None:
    raw = trip_plan_json()
    raw["branches"] = [{"participant": "p", "operation": "o", "tier": "final", **b} for b in branches]
    plan = Plan.model_validate(raw)
    money = _plan_money(plan)
    totals, up_to = _reference(plan)
    # the same digits, not only equal values (Decimal("1.0") == Decimal("1.00")): the totals are shown and signed
    assert _text(money.totals) == _text(totals) and _text(money.up_to) == _text(up_to)
    assert [_one(m) for m in money.most] == [_one(branch_most(b)) for b in plan.branches]


def _text(values: dict[str, Decimal]) -> list[tuple[str, str]]:
    return [(c, str(v)) for c, v in values.items()]  # in insertion order too


def _one(value: Decimal | None) -> str | None:
    return None if value is None else str(value)

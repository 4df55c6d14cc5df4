"""What a plan moves, per currency: the one computation the validator, the gateway and approvers share. Pure.

A branch's most is amount x (1 + tolerance/100). A branch another branch `settles` is paid by that branch and is
not counted on its own; the payer counts once, at the larger of its own amount and what it settles (fail closed:
never the smaller, even when the validator's HATP-VAL-6 check that a payer covers what it settles was not run).
A branch no counted payer reaches (branches that settle each other, a cycle the validator refuses) counts on its
own (HATP-GW-50): settling never hides an amount.
Currencies are never converted. Negative amounts are not refused here: callers refuse them with their own rule
(HATP-VAL-5 in the validator, HATP-GW-2/3 at the gateway) before trusting a total.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property

from hatp_mcp.core.model.amount import Amount, tolerated, with_tolerance
from hatp_mcp.core.model.plan import Branch, Plan, remembered

__all__ = ["PlanMoney", "branch_most", "plan_money", "show_money"]

_ZERO = Decimal(0)


@dataclass(frozen=True)
class PlanMoney:
    """Per-currency totals of a plan: `totals` as quoted, `up_to` with every tolerance applied; `most` is each
    branch's own most (`branch_most`), in plan order, so the checks that need one do not compute it again."""

    totals: dict[str, Decimal]
    up_to: dict[str, Decimal]
    most: tuple[Decimal | None, ...]

    @property
    def moves_money(self) -> bool:
        """True when any branch states an amount (even zero: an amount was named, so it must be checked)."""
        return bool(self.up_to)

    def amounts(self) -> tuple[list[Amount], list[Amount]]:
        """(totals, up_to) as wire Amounts, sorted by currency (new lists each call; the Amounts are immutable)."""
        totals, up_to = self._amounts
        return list(totals), list(up_to)

    @cached_property
    def _amounts(self) -> tuple[tuple[Amount, ...], tuple[Amount, ...]]:
        cur = sorted(self.totals)
        return tuple(Amount.of(self.totals[c], c) for c in cur), tuple(Amount.of(self.up_to[c], c) for c in cur)


def branch_most(b: Branch) -> Decimal | None:
    """The most a branch may cost (amount with tolerance), in its amount's currency; None without an amount."""
    if b.amount is None:
        return None
    if b.tolerance_percent is None:
        return b.amount.decimal
    return with_tolerance(b.amount, b.tolerance_percent)


def plan_money(plan: Plan) -> PlanMoney:
    """Add up a plan's branches per currency (see the module docstring), once per Plan object (the validator, the
    gateway and the approver all ask). Raises nothing. The result is shared: read it, never change it."""
    return remembered(plan, "money", _plan_money)


def _plan_money(plan: Plan) -> PlanMoney:
    own: dict[str, tuple[str, Decimal, Decimal]] = {}
    by_id: dict[str, Branch] = {}
    mosts: list[Decimal | None] = []
    settles_any = False
    for b in plan.branches:
        by_id[b.branch_id] = b
        if b.settles:
            settles_any = True
        amount = b.amount
        if amount is None:
            mosts.append(None)
            continue
        d = amount.decimal
        most = d if b.tolerance_percent is None else tolerated(d, b.tolerance_percent)
        mosts.append(most)
        own[b.branch_id] = (amount.currency, d, most)
    most_of = tuple(mosts)
    settled = {s for b in plan.branches for s in b.settles if s in by_id and s != b.branch_id} if settles_any else set()
    totals: dict[str, Decimal] = {}
    up_to: dict[str, Decimal] = {}
    if not settled:  # the common case: every amount counts once, as stated
        for c, t, u in own.values():
            totals[c] = totals.get(c, _ZERO) + t
            up_to[c] = up_to.get(c, _ZERO) + u
        return PlanMoney(totals=totals, up_to=up_to, most=most_of)

    done: dict[str, dict[str, tuple[Decimal, Decimal]]] = {}
    reached: set[str] = set()
    for b in plan.branches:
        bid = b.branch_id
        if bid in settled:
            continue  # its payer counts it
        if by_id[bid].settles:
            stands = _effective(bid, frozenset({bid}), by_id, own, done, reached)
        else:  # a leaf stands for its own amount
            reached.add(bid)
            o = own.get(bid)
            stands = {o[0]: (o[1], o[2])} if o is not None else {}
        for c, (t, u) in stands.items():
            totals[c] = totals.get(c, _ZERO) + t
            up_to[c] = up_to.get(c, _ZERO) + u
    for bid, (c, t, u) in own.items():  # HATP-GW-50: settled, but by no payer that was counted (a cycle)
        if bid not in reached:
            totals[c] = totals.get(c, _ZERO) + t
            up_to[c] = up_to.get(c, _ZERO) + u
    return PlanMoney(totals=totals, up_to=up_to, most=most_of)


def _effective(
    bid: str,
    path: frozenset[str],
    by_id: dict[str, Branch],
    own: dict[str, tuple[str, Decimal, Decimal]],
    done: dict[str, dict[str, tuple[Decimal, Decimal]]],
    reached: set[str],
) -> dict[str, tuple[Decimal, Decimal]]:
    """What a branch that settles others stands for: the larger of its own amount and the sum of what it settles,
    per currency. `path` guards against settles cycles (the validator refuses them; here they just stop the walk);
    `done` keeps each payer's result, `reached` every branch the walk met."""
    reached.add(bid)
    if bid in done:
        return done[bid]
    out: dict[str, tuple[Decimal, Decimal]] = {}
    for s in by_id[bid].settles:
        if s in by_id and s not in path:
            if by_id[s].settles:
                stands = _effective(s, path | {s}, by_id, own, done, reached)
            else:  # a leaf stands for its own amount
                reached.add(s)
                o = own.get(s)
                stands = {o[0]: (o[1], o[2])} if o is not None else {}
            for c, (t, u) in stands.items():
                pt, pu = out.get(c, (_ZERO, _ZERO))
                out[c] = (pt + t, pu + u)
    if bid in own:
        c, t, u = own[bid]
        st, su = out.get(c, (_ZERO, _ZERO))
        out[c] = (max(t, st), max(u, su))
    done[bid] = out
    return out


def show_money(money: PlanMoney) -> list[str]:
    """What the approver is shown per currency: ``$1,000.00, up to $1,020.00`` (or just the total)."""
    out = []
    for c in sorted(money.totals):
        total, most = Amount.of(money.totals[c], c), Amount.of(money.up_to[c], c)
        out.append(total.display() if most.decimal == total.decimal else f"{total.display()}, up to {most.display()}")
    return out

"""Authority from the plan, not from the agent: what a plan moves per currency, and whether a requirement or a
person's card covers it. Pure: no IO, no clock.

The gateway never trusts the amount an agent puts in a requirement; it adds up the plan's own branches per
currency (tolerance included) and checks everyone against that. Currencies are never converted.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from hatp_mcp.core.model.amount import Amount, with_tolerance
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.plan import ApprovalRequirement, Plan
from hatp_mcp.errors import HatpError

__all__ = ["PlanMoney", "card_authority_gap", "check_requirement", "plan_money", "show_money"]


@dataclass(frozen=True, slots=True)
class PlanMoney:
    """Per-currency totals of a plan: `totals` as quoted, `up_to` with every tolerance applied."""

    totals: dict[str, Decimal]
    up_to: dict[str, Decimal]

    @property
    def moves_money(self) -> bool:
        """True when any branch states an amount (even zero: an amount was named, so it must be checked)."""
        return bool(self.up_to)

    def amounts(self) -> tuple[list[Amount], list[Amount]]:
        cur = sorted(self.totals)
        return [Amount.of(self.totals[c], c) for c in cur], [Amount.of(self.up_to[c], c) for c in cur]


def plan_money(plan: Plan) -> PlanMoney:
    """Add up a plan's branches per currency. A branch another branch `settles` is paid by that branch: the
    payer counts once, at the larger of its own amount and what it settles (fail closed: never the smaller).

    Raises HatpError HATP-GW-2 (a negative branch amount) and HATP-GW-3 (a negative tolerance).
    """
    by_id = {b.branch_id: b for b in plan.branches}
    own: dict[str, tuple[str, Decimal, Decimal]] = {}
    for i, b in enumerate(plan.branches):
        if b.amount is None:
            continue
        if b.amount.decimal < 0:
            raise HatpError(
                "HATP-GW-2",
                f"branch {b.branch_id!r} has a negative amount {b.amount.value} {b.amount.currency}: "
                "a negative branch would hide spending from the total",
                path=f"branches[{i}].amount.value",
                fix="state refunds as their own transaction; every branch amount is zero or more",
                code="NEGATIVE_AMOUNT",
            )
        if b.tolerance_percent is not None and Decimal(b.tolerance_percent) < 0:
            raise HatpError(
                "HATP-GW-3",
                f"branch {b.branch_id!r} has a negative tolerance {b.tolerance_percent}%: "
                "a tolerance widens what may be spent, it never shrinks the total",
                path=f"branches[{i}].tolerancePercent",
                fix="give a tolerance of 0 or more",
                code="NEGATIVE_TOLERANCE",
            )
        own[b.branch_id] = (b.amount.currency, b.amount.decimal, with_tolerance(b.amount, b.tolerance_percent))
    settled = {s for b in plan.branches for s in b.settles if s in by_id and s != b.branch_id}

    def effective(bid: str, seen: frozenset[str]) -> dict[str, tuple[Decimal, Decimal]]:
        # What a branch stands for: the larger of its own amount and the sum of what it settles, per currency.
        b = by_id[bid]
        out: dict[str, tuple[Decimal, Decimal]] = {}
        for s in b.settles:
            if s in by_id and s not in seen and s != bid:
                for c, (t, u) in effective(s, seen | {s}).items():
                    pt, pu = out.get(c, (Decimal(0), Decimal(0)))
                    out[c] = (pt + t, pu + u)
        if bid in own:
            c, t, u = own[bid]
            st, su = out.get(c, (Decimal(0), Decimal(0)))
            out[c] = (max(t, st), max(u, su))
        return out

    totals: dict[str, Decimal] = {}
    up_to: dict[str, Decimal] = {}
    for b in plan.branches:
        if b.branch_id in settled:
            continue  # its payer counts it
        for c, (t, u) in effective(b.branch_id, frozenset({b.branch_id})).items():
            totals[c] = totals.get(c, Decimal(0)) + t
            up_to[c] = up_to.get(c, Decimal(0)) + u
    return PlanMoney(totals=totals, up_to=up_to)


def show_money(money: PlanMoney) -> list[str]:
    """What the approver is shown per currency: ``$1,000.00, up to $1,020.00`` (or just the total)."""
    out = []
    for c in sorted(money.totals):
        total, most = Amount.of(money.totals[c], c), Amount.of(money.up_to[c], c)
        out.append(total.display() if most.decimal == total.decimal else f"{total.display()}, up to {most.display()}")
    return out


def check_requirement(req: ApprovalRequirement, money: PlanMoney, path: str = "$") -> None:
    """A requirement's `maxAmount`, when the agent states one, must cover the plan's own total with tolerance,
    in every currency the plan moves (a currency it does not name counts as zero: nothing is converted).

    Raises HatpError HATP-GW-1.
    """
    if req.max_amount is None:
        return
    for c in sorted(money.up_to):
        stated = req.max_amount.decimal if req.max_amount.currency == c else Decimal(0)
        if stated < money.up_to[c]:
            most = Amount.of(money.up_to[c], c).display()
            raise HatpError(
                "HATP-GW-1",
                f"requirement {req.id!r} asks to authorize {req.max_amount.display()} but the plan's branches add "
                f"up to {most} ({c}); authority is checked against the plan, never the agent's figure",
                path=f"{path}.maxAmount",
                fix=f"state maxAmount of at least {most}, or drop it and let the gateway use the plan's total",
                code="REQUIREMENT_BELOW_TOTAL",
            )


def card_authority_gap(card: HumanCard, action: str, up_to: dict[str, Decimal]) -> str | None:
    """None when the card may approve `action` for every amount in `up_to`; else a one-line reason."""
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

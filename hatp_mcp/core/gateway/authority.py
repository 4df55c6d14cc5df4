"""Authority from the plan, not from the agent: what a plan moves per currency, and whether a requirement or a
person's card covers it. Pure: no IO, no clock.

The gateway never trusts the amount an agent puts in a requirement; it adds up the plan's own branches per
currency (tolerance included) and checks everyone against that. Currencies are never converted.
"""

from __future__ import annotations

from decimal import Decimal

from hatp_mcp.core.model.amount import Amount, amount_holds, fits_wire, with_tolerance
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.money import PlanMoney, show_money
from hatp_mcp.core.model.money import plan_money as _plan_money
from hatp_mcp.core.model.plan import ApprovalRequirement, Plan
from hatp_mcp.errors import HatpError

__all__ = ["PlanMoney", "card_authority_gap", "check_requirement", "plan_money", "show_money"]


def plan_money(plan: Plan) -> PlanMoney:
    """The plan's money (hatp_mcp.core.money.plan_money), refusing what would make a total lie first.

    Raises HatpError HATP-GW-2 (a negative branch amount) and HATP-GW-3 (a negative tolerance).
    """
    for i, b in enumerate(plan.branches):
        if b.amount is not None and b.amount.decimal < 0:
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
        if b.amount is not None and b.tolerance_percent is not None:
            ceiling = with_tolerance(b.amount, b.tolerance_percent)
            if not fits_wire(ceiling):
                raise HatpError(
                    "HATP-GW-3",
                    f"branch {b.branch_id!r} may cost up to {format(ceiling, 'f')} {b.amount.currency}, more than 18 "
                    "digits on a side of the point: no approval screen can state that ceiling",
                    path=f"branches[{i}].tolerancePercent",
                    fix="give a tolerance with fewer decimals (hatp validate reports it as HATP-VAL-5)",
                    code="UNSTATABLE_CEILING",
                )
    return _plan_money(plan)


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
    """None when the card may approve `action` for every amount in `up_to`; else a one-line reason.

    Raises what `Amount.of(up_to[c], c)` raises for an amount no wire Amount can hold (pydantic's ValidationError),
    whether or not the card covers it. The amounts are shown only in a reason; a covered one is checked by the
    rule `Amount.of` applies (`amount_holds`), not built (tests/core/gateway/test_authority.py proves it equal to
    building it)."""
    grants = [a for a in card.authority if a.action == action]
    if not grants:
        return f"no authority for {action!r}"
    for c in sorted(up_to):
        if not amount_holds(up_to[c], c):
            Amount.of(up_to[c], c)  # its own refusal: the same error building the shown amount always raised
        limits = [m.decimal for g in grants for m in g.max_amount if m.currency == c]
        if not limits:
            need = Amount.of(up_to[c], c).display()
            return f"no limit in {c} for {action!r} (needs {need}; currencies are never converted)"
        if max(limits) < up_to[c]:
            need = Amount.of(up_to[c], c).display()
            return f"limit {Amount.of(max(limits), c).display()} is below {need}"
    return None

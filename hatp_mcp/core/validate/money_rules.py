"""The money rules of the static validator (HATP-VAL-5..8): signs, `settles`, approval amounts, mandate caps. Pure.

Amounts are exact decimals kept per currency and never converted. A branch's most is amount x (1 + tolerance/100);
the plan's totals come from hatp_mcp.core.model.money, shared with the gateway so both check the same numbers. This
module must not read the clock or do IO.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from hatp_mcp.core.model.amount import display_money as _show
from hatp_mcp.core.model.amount import fits_wire
from hatp_mcp.core.model.money import branch_most, plan_money
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.validate.violation import Violation

__all__ = [
    "branch_most",
    "check_amounts",
    "check_approval_amounts",
    "check_mandate_spend",
    "check_settles",
    "plan_totals",
]

_ZERO = Decimal(0)


def plan_totals(plan: Plan) -> dict[str, Decimal]:
    """The plan's own total per currency, tolerance included (hatp_mcp.core.model.money: the gateway's computation,
    done once per Plan object); a copy is returned."""
    return dict(plan_money(plan).up_to)


def _negative(value: str | None) -> bool:
    # a wire decimal is negative only when it starts with "-" (and is not a negative zero)
    return value is not None and value.startswith("-") and Decimal(value) < 0


def _refuse_negative(out: list[Violation], path: str, value: str | None, who: str) -> None:
    out.append(
        Violation(
            rule="HATP-VAL-5",
            path=path,
            message=f"{path} of {who} is {value}, negative: a negative amount or tolerance would lower the "
            f"totals approvers and mandates are checked against, hiding a cost. Use a value >= 0 (a refund "
            f"is its own transaction).",
        )
    )


def check_amounts(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-5: no negative branch amount, tolerance, approval maxAmount or mandate cap."""
    out: list[Violation] = []
    most = plan_money(plan).most
    for i, b in enumerate(plan.branches):
        amount, tolerance = b.amount, b.tolerance_percent
        if amount is not None and _negative(amount.value):
            _refuse_negative(out, f"branches[{i}].amount", amount.value, f'branch "{b.branch_id}"')
        if _negative(tolerance):
            _refuse_negative(out, f"branches[{i}].tolerancePercent", tolerance, f'branch "{b.branch_id}"')
        elif amount is not None and tolerance is not None:
            ceiling = most[i]  # the amount with its tolerance, as plan_money computed it
            if ceiling is not None and not fits_wire(ceiling):
                out.append(
                    Violation(
                        rule="HATP-VAL-5",
                        path=f"branches[{i}].tolerancePercent",
                        message=f'Branch "{b.branch_id}" may cost up to {format(ceiling, "f")} {amount.currency} '
                        f"({amount.value} plus {tolerance}%), a number with more than 18 digits on a "
                        f"side of the point: no approval screen can state it and no approver can sign for it. Use "
                        f"a tolerance with fewer decimals (or a smaller amount).",
                    )
                )
    for i, a in enumerate(plan.approvals):
        if a.max_amount is not None and _negative(a.max_amount.value):
            _refuse_negative(out, f"approvals[{i}].maxAmount", a.max_amount.value, f'approval "{a.id}"')
    if plan.mandate is not None:
        for i, cap in enumerate(plan.mandate.max_spend):
            if _negative(cap.value):
                _refuse_negative(out, f"mandate.maxSpend[{i}]", cap.value, "the mandate")
    return out


def check_settles(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-6: `settles` names other existing branches, once each, acyclically, and the payer covers them."""
    out: list[Violation] = []
    index = {b.branch_id: i for i, b in enumerate(plan.branches)}
    settled_by: dict[str, str] = {}
    for i, b in enumerate(plan.branches):
        for j, target in enumerate(b.settles):
            if target == b.branch_id:
                msg = f'Branch "{b.branch_id}" settles itself, which would drop its own cost from the totals.'
                out.append(
                    Violation(
                        rule="HATP-VAL-6", path=f"branches[{i}].settles[{j}]", message=msg + " Remove it from settles."
                    )
                )
            elif target not in index:
                out.append(
                    Violation(
                        rule="HATP-VAL-6",
                        path=f"branches[{i}].settles[{j}]",
                        message=f'Branch "{b.branch_id}" settles "{target}", but no branch has that id. Name an '
                        f"existing branchId, or remove it.",
                    )
                )
            elif target in settled_by:
                out.append(
                    Violation(
                        rule="HATP-VAL-6",
                        path=f"branches[{i}].settles[{j}]",
                        message=f'"{target}" is already settled by "{settled_by[target]}"; "{b.branch_id}" settling '
                        f"it too would pay it twice. Let one branch settle it.",
                    )
                )
            else:
                settled_by[target] = b.branch_id
    # cycles: following settled_by upwards from any branch must end at an unsettled payer
    for start in settled_by:
        seen = {start}
        cur = settled_by[start]
        while cur in settled_by and cur not in seen:
            seen.add(cur)
            cur = settled_by[cur]
        if cur in seen and cur == start:
            i = index[settled_by[start]]
            out.append(
                Violation(
                    rule="HATP-VAL-6",
                    path=f"branches[{i}].settles",
                    message=f'"{start}" is settled in a cycle ({" -> ".join(sorted(seen))}): no branch in it is '
                    f"counted, so its cost disappears from the totals. Break the cycle.",
                )
            )
    most = plan_money(plan).most  # each branch's branch_most, computed once
    for i, b in enumerate(plan.branches):
        if b.settles:
            targets = [index[t] for t in b.settles if t in index and t != b.branch_id]
            _cover(plan, most, i, targets, out)
    return out


def _cover(plan: Plan, most: tuple[Decimal | None, ...], i: int, target_at: list[int], out: list[Violation]) -> None:
    payer = plan.branches[i]
    targets = [plan.branches[j] for j in target_at]
    owed: dict[str, Decimal] = {}
    for j, t in zip(target_at, targets, strict=True):
        owes = most[j]
        if owes is None or t.amount is None:
            continue
        owed[t.amount.currency] = owed.get(t.amount.currency, _ZERO) + owes
    if not owed:
        return
    pays = most[i]
    cur = payer.amount.currency if payer.amount else None
    for currency, total in sorted(owed.items()):
        if pays is None or cur != currency:
            names = _names(targets, currency)
            have = "no amount" if pays is None else f"an amount in {cur}"
            out.append(
                Violation(
                    rule="HATP-VAL-6",
                    path=f"branches[{i}].amount",
                    message=f'Branch "{payer.branch_id}" settles {names}, up to {_show(total, currency)}, but has '
                    f"{have}: their cost would vanish from the totals. Give it an amount in {currency} of at least "
                    f"{_show(total, currency)} (currencies are never converted), or drop settles.",
                )
            )
        elif pays < total:
            names = _names(targets, currency)
            out.append(
                Violation(
                    rule="HATP-VAL-6",
                    path=f"branches[{i}].amount",
                    message=f'Branch "{payer.branch_id}" settles {names}, which may cost up to '
                    f"{_show(total, currency)} with tolerance, but may itself charge at most {_show(pays, currency)}: "
                    f"{_show(total - pays, currency)} of cost would be hidden from the totals. Raise its amount or "
                    f"tolerance to cover {_show(total, currency)}.",
                )
            )


def _names(targets: list[Branch], currency: str) -> str:
    return ", ".join(f'"{t.branch_id}"' for t in targets if t.amount and t.amount.currency == currency)


def check_approval_amounts(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-7: an approval's maxAmount covers the plan's own total, with tolerance, in every currency."""
    totals = plan_money(plan).up_to  # shared: read only
    out: list[Violation] = []
    for i, a in enumerate(plan.approvals):
        if a.max_amount is None:
            continue
        asked = a.max_amount
        for currency, total in sorted(totals.items()):
            if total <= 0:
                continue
            if currency != asked.currency:
                out.append(
                    Violation(
                        rule="HATP-VAL-7",
                        path=f"approvals[{i}].maxAmount",
                        message=f'Approval "{a.id}" asks to authorize {asked.display()}, but the plan also spends up '
                        f"to {_show(total, currency)}, which it does not cover (currencies are never converted). "
                        f"One maxAmount cannot cover two currencies: drop it, so the gateway shows the plan's own "
                        f"totals in every currency, or pay the {currency} part in {asked.currency}.",
                    )
                )
            elif asked.decimal < total:
                out.append(
                    Violation(
                        rule="HATP-VAL-7",
                        path=f"approvals[{i}].maxAmount",
                        message=f'Approval "{a.id}" asks to authorize {asked.display()}, but the plan may spend up '
                        f"to {_show(total, currency)} with tolerance: the approver would sign for less than the "
                        f"plan can cost. Ask for at least {_show(total, currency)}.",
                    )
                )
    return out


def check_mandate_spend(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-8: the plan's total in each currency is within the mandate's cap in that currency."""
    if plan.mandate is None:
        return []
    caps: dict[str, Decimal] = {}
    for cap in plan.mandate.max_spend:
        caps[cap.currency] = min(caps.get(cap.currency, cap.decimal), cap.decimal)
    out: list[Violation] = []
    for currency, total in sorted(plan_money(plan).up_to.items()):
        if total <= 0:
            continue
        cap_value = caps.get(currency)
        if cap_value is None:
            out.append(
                Violation(
                    rule="HATP-VAL-8",
                    path="mandate.maxSpend",
                    message=f"The plan spends up to {_show(total, currency)}, but the mandate caps no spending in "
                    f"{currency}, so it allows none. Ask the principal for a {currency} cap, or pay in a currency "
                    f"the mandate covers.",
                )
            )
        elif total > cap_value:
            out.append(
                Violation(
                    rule="HATP-VAL-8",
                    path="mandate.maxSpend",
                    message=f"The plan may spend up to {_show(total, currency)} with tolerance, over the mandate's "
                    f"cap of {_show(cap_value, currency)}. Lower the plan's amounts by "
                    f"{_show(total - cap_value, currency)}, or ask the principal for a larger mandate.",
                )
            )
    return out

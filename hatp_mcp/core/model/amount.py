"""Money: exact decimal strings with an ISO 4217 currency. Never floats, never converted. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Annotated

from pydantic import Field

from hatp_mcp.core.model.base import DecimalStr, WireModel, is_decimal_text

__all__ = [
    "Amount",
    "Currency",
    "amount_holds",
    "display_money",
    "fits_wire",
    "tolerated",
    "totals",
    "with_tolerance",
]

_CURRENCY = r"[A-Z]{3}"
Currency = Annotated[str, Field(pattern=f"^{_CURRENCY}$", description="An ISO 4217 code, e.g. USD.")]
_IS_CURRENCY = re.compile(_CURRENCY)


class Amount(WireModel):
    """``{"value": "412.50", "currency": "USD"}``. An integer value is accepted and kept as its string."""

    value: DecimalStr
    currency: Currency

    @property
    def decimal(self) -> Decimal:
        return Decimal(self.value)

    @classmethod
    def of(cls, value: Decimal | int | str, currency: str) -> Amount:
        return cls(value=_wire_text(value), currency=currency)

    def display(self) -> str:
        """Human form: ``$1,020.00`` for USD, ``1,020.00 EUR`` otherwise (never converted)."""
        return display_money(self.decimal, self.currency)


def _wire_text(value: object) -> str:
    """The text `Amount.of` writes for a value: a Decimal in fixed notation, anything else as str()."""
    return format(value, "f") if isinstance(value, Decimal) else str(value)


def amount_holds(value: object, currency: object) -> bool:
    """True only when `Amount.of(value, currency)` succeeds, without building it: the text it writes is a wire
    decimal (DecimalStr's rule) and the currency matches Currency's pattern. False: it may fail, and Amount.of
    then decides and raises."""
    return type(currency) is str and _IS_CURRENCY.fullmatch(currency) is not None and is_decimal_text(_wire_text(value))


_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}


def display_money(value: Decimal, currency: str) -> str:
    """Human form of any exact decimal in a currency (a product or sum may have more digits than a wire amount):
    cents when they suffice, else every digit; never exponent notation."""
    text = f"{value:,.2f}" if value == value.quantize(Decimal("0.01")) else f"{value.normalize():,f}"
    sym = _SYMBOLS.get(currency)
    return f"{sym}{text}" if sym else f"{text} {currency}"


def totals(amounts: Iterable[Amount]) -> dict[str, Decimal]:
    """Sum per currency, exactly. Currencies are never mixed or converted."""
    out: dict[str, Decimal] = {}
    for a in amounts:
        out[a.currency] = out.get(a.currency, Decimal(0)) + a.decimal
    return out


def fits_wire(value: Decimal) -> bool:
    """Whether `Amount.of(value, ...)` can carry this exact decimal: at most 18 digits on each side of the point.
    A branch's ceiling (amount with tolerance) that does not fit cannot be shown to or signed by an approver."""
    return is_decimal_text(_wire_text(value))  # the text Amount.of writes, checked by DecimalStr's own rule


def with_tolerance(amount: Amount, tolerance_percent: str | None) -> Decimal:
    """The most a branch may cost: amount x (1 + tolerance/100). Negative tolerances are the caller's to refuse."""
    return tolerated(amount.decimal, tolerance_percent)


_ONE = Decimal(1)
_HUNDRED = Decimal(100)


def tolerated(value: Decimal, tolerance_percent: str | None) -> Decimal:
    """`with_tolerance` for an amount's value already made a Decimal: value x (1 + tolerance/100), the same
    operations in the same order (so the same rounding, in the caller's decimal context)."""
    pct = Decimal(tolerance_percent) if tolerance_percent is not None else _ZERO
    return value * (_ONE + pct / _HUNDRED)


_ZERO = Decimal(0)

"""Money: exact decimal strings with an ISO 4217 currency. Never floats, never converted. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Annotated

from pydantic import Field

from hatp_mcp.core.model.base import DecimalStr, WireModel

__all__ = ["Amount", "Currency", "totals", "with_tolerance"]

Currency = Annotated[str, Field(pattern=r"^[A-Z]{3}$")]


class Amount(WireModel):
    """``{"value": "412.50", "currency": "USD"}``. An integer value is accepted and kept as its string."""

    value: DecimalStr
    currency: Currency

    @property
    def decimal(self) -> Decimal:
        return Decimal(self.value)

    @classmethod
    def of(cls, value: Decimal | int | str, currency: str) -> Amount:
        text = format(value, "f") if isinstance(value, Decimal) else str(value)
        return cls(value=text, currency=currency)

    def display(self) -> str:
        """Human form: ``$1,020.00`` for USD, ``1,020.00 EUR`` otherwise (never converted)."""
        symbols = {"USD": "$", "EUR": "€", "GBP": "£"}
        q = self.decimal
        text = f"{q:,.2f}" if q == q.quantize(Decimal("0.01")) else f"{q:,}"
        sym = symbols.get(self.currency)
        return f"{sym}{text}" if sym else f"{text} {self.currency}"


def totals(amounts: Iterable[Amount]) -> dict[str, Decimal]:
    """Sum per currency, exactly. Currencies are never mixed or converted."""
    out: dict[str, Decimal] = {}
    for a in amounts:
        out[a.currency] = out.get(a.currency, Decimal(0)) + a.decimal
    return out


def with_tolerance(amount: Amount, tolerance_percent: str | None) -> Decimal:
    """The most a branch may cost: amount x (1 + tolerance/100). Negative tolerances are the caller's to refuse."""
    pct = Decimal(tolerance_percent) if tolerance_percent is not None else Decimal(0)
    return amount.decimal * (Decimal(1) + pct / Decimal(100))

"""Human Cards: who a person is to the protocol, signed by their organisation's Directory. Pure.

Contact details never appear here: a card lists channel types only; addresses live inside the gateway.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import Seconds, SignedModel, Timestamp, WireModel

__all__ = [
    "Authority",
    "Availability",
    "Capacity",
    "CardKey",
    "Channel",
    "HumanCard",
    "Sla",
    "WellKnown",
]


class Authority(WireModel):
    """The person may approve `action` up to `maxAmount` in each listed currency (none listed: no money)."""

    action: str = Field(min_length=1, max_length=200)
    max_amount: list[Amount] = Field(default_factory=list)


class Channel(WireModel):
    type: Literal["inbox", "email", "sms", "chat", "web", "phone"]


class Availability(WireModel):
    timezone: str = Field(min_length=1, max_length=64)
    status: Literal["available", "away", "offline"]


class Sla(WireModel):
    decide_seconds: Seconds


class Capacity(WireModel):
    max_open: int = Field(ge=0, le=100_000)
    open: int = Field(ge=0, le=100_000)


class CardKey(WireModel):
    """A key the person decides with: a WebAuthn passkey (COSE public key) or an Ed25519 JWK thumbprint."""

    type: Literal["passkey", "ed25519"]
    id: str = Field(min_length=1, max_length=512)
    public_key: str = Field(min_length=1, max_length=4096)


class HumanCard(SignedModel):
    type: Literal["hatp.card"] = "hatp.card"
    id: str = Field(min_length=1, max_length=500)
    display_name: str = Field(min_length=1, max_length=200)
    roles: list[str] = Field(default_factory=list)
    skills: list[str] = Field(default_factory=list)
    authority: list[Authority] = Field(default_factory=list)
    channels: list[Channel] = Field(default_factory=list)
    availability: Availability
    sla: Sla
    capacity: Capacity
    delegates: list[str] = Field(default_factory=list)
    keys: list[CardKey] = Field(default_factory=list)
    issuer: str = Field(min_length=1, max_length=500)
    issued_at: Timestamp


class WellKnown(WireModel):
    """``/.well-known/human-card.json``: an organisation's Directory, Gateway and card-signing keys."""

    type: Literal["hatp.well-known"] = "hatp.well-known"
    organization: str = Field(min_length=1, max_length=253)
    directory: str = Field(min_length=1, max_length=500)
    gateway: str = Field(min_length=1, max_length=500)
    keys: list[dict[str, object]] = Field(min_length=1)

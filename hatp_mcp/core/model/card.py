"""Human Cards: who a person is to the protocol, signed by their organisation's Directory. Pure.

Contact details never appear here: a card lists channel types only; addresses live inside the gateway.
"""

from __future__ import annotations

import base64
import re
from typing import Literal, Self

from pydantic import Field, model_validator

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


_B64U_32 = re.compile(r"^[A-Za-z0-9_-]{43}$")


class CardKey(WireModel):
    """A key the person decides with. `ed25519`: `id` is the kid their decision proofs name and `publicKey` the
    JWK `x` (32 bytes, unpadded base64url), checked here. `passkey`: a WebAuthn credential (placeholder until the
    passkey page lands; never accepted as a decision proof, see spec/gateway.md)."""

    type: Literal["passkey", "ed25519"]
    id: str = Field(min_length=1, max_length=512)
    public_key: str = Field(min_length=1, max_length=4096)

    @model_validator(mode="after")
    def _ed25519_is_a_public_key(self) -> Self:
        if self.type == "ed25519" and (
            not _B64U_32.fullmatch(self.public_key) or len(base64.urlsafe_b64decode(self.public_key + "=")) != 32
        ):
            raise ValueError("an ed25519 key's publicKey is the JWK x: 32 bytes, unpadded base64url (43 characters)")
        return self


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

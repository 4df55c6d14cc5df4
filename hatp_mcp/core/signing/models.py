"""Signing and verifying wire models as evidence.

Signatures always cover the object as it was received (its raw JSON), not a re-serialization, so a verifier
never depends on how it would have printed the object. Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, Self, TypeVar

from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object, verify_object


class SignedModel(Protocol):
    """What signing needs of a wire model (hatp_mcp.core.model.base.SignedModel is one). A protocol, because the
    models build on this part's canonical JSON: evidence stays below the model."""

    def wire(self) -> dict[str, Any]: ...

    @classmethod
    def model_validate(cls, obj: Any, /) -> Self: ...


__all__ = ["sign_model", "verify_model", "verify_raw"]

S = TypeVar("S", bound=SignedModel)


def sign_model(model: S, key: SigningKey) -> S:
    """Return a copy of `model` carrying key's signature over its canonical wire form."""
    signed = sign_object(model.wire(), key)
    return type(model).model_validate(signed)


def verify_model(model: SignedModel, keyring: Keyring, role: str | None = None, path: str = "$") -> str:
    """Verify a model's signature over its wire form; returns the kid. Raises SignatureError."""
    return verify_object(model.wire(), keyring, role, path)


def verify_raw(obj: Mapping[str, Any], keyring: Keyring, role: str | None = None, path: str = "$") -> str:
    """Verify a received JSON object's signature as received; returns the kid. Raises SignatureError."""
    return verify_object(obj, keyring, role, path)

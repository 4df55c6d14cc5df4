"""The base of every wire model: camelCase on the wire, strict types, unknown members refused.

Also the shared field types: timestamps (RFC 3339 UTC, kept as the exact string so digests never depend on how
a library prints a datetime), identifiers, decimal strings and the ``signature`` member. Pure: no IO.
"""

from __future__ import annotations

import math
import re
import sys
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from hatp_mcp.core.signing.canonical import canonical, digest, within_safe_domain

__all__ = [
    "NON_FINITE",
    "DecimalStr",
    "Ident",
    "JsonObject",
    "Seconds",
    "Signature",
    "SignedModel",
    "Timestamp",
    "WireModel",
    "format_ts",
    "is_decimal_text",
    "parse_ts",
]

_TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$")
_DEC = re.compile(r"^-?(0|[1-9]\d{0,17})(\.\d{1,18})?$")
_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}$")


def is_decimal_text(text: str) -> bool:
    """Whether `text` is a wire decimal (DecimalStr): at most 18 digits on each side of the point, no exponent."""
    return _DEC.fullmatch(text) is not None


@lru_cache(maxsize=4096)
def parse_ts(value: str) -> datetime:
    """Parse a wire timestamp (``2026-11-29T10:00:00Z``) to an aware UTC datetime. Raises ValueError.

    Remembered: a transaction parses the same few dozen times again and again (datetimes are immutable)."""
    if not _TS.fullmatch(value):
        raise ValueError(f"{value!r} is not an RFC 3339 UTC timestamp like 2026-11-29T10:00:00Z")
    return datetime.fromisoformat(value[:-1]).replace(tzinfo=UTC)


def format_ts(value: datetime) -> str:
    """Format an aware datetime as a wire timestamp (UTC, 'Z', microseconds only when present, four-digit year)."""
    if value.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware datetime")
    if value.utcoffset():
        value = value.astimezone(UTC)
    text = value.replace(tzinfo=None).isoformat()  # YYYY-MM-DDTHH:MM:SS[.ffffff]
    return (text.rstrip("0") if value.microsecond else text) + "Z"


def _check_ts(value: str) -> str:
    parse_ts(value)
    return value


def _check_decimal(value: object) -> object:
    if type(value) is str and _DEC.fullmatch(value):  # the common case; the pattern admits only valid decimals
        return value
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, float):
        raise ValueError(
            "a float is not allowed here: floats make amounts and digests ambiguous; send a decimal string "
            'such as "12.50"'
        )
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not _DEC.fullmatch(value):
        raise ValueError(f'{value!r} is not a decimal string such as "12.50" (at most 18 digits each side)')
    return value


def _check_ident(value: str) -> str:
    if not _IDENT.fullmatch(value):
        raise ValueError(f"{value!r} is not an identifier (letters, digits and ._:@/+- , at most 128 characters)")
    return value


# The schemas say what the validators check, so a client (or a model) filling one in sees the formats.
Timestamp = Annotated[
    str,
    AfterValidator(_check_ts),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "pattern": _TS.pattern,
            "description": "An RFC 3339 time in UTC with Z, e.g. 2026-12-01T09:00:00Z.",
        }
    ),
]
NON_FINITE = "non_finite_number"  # the pydantic error type of HATP-OBJ-4 (hatp_mcp.core.model.wire maps it)
_MAX_DOUBLE = sys.float_info.max


def _check_finite(value: dict[str, Any]) -> dict[str, Any]:
    """HATP-OBJ-4: nothing inside a JSON value is NaN, an infinity or a number beyond a double. Without this,
    serializing would turn each of them into null, and `{"x": 1e400}`, `{"x": NaN}` and `{"x": null}` would share
    one digest. Raises PydanticCustomError naming the inner path. A first walk only looks (no paths built): the
    value is checked on every parse of a plan, a record event or evidence, and is almost always fine; the compiled
    walk of the canonical form's domain (no float at all, every integer safe) settles most values at once."""
    if within_safe_domain(value) or _all_finite(value):
        return value
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        v, path = stack.pop()
        t = type(v)
        if t is dict:
            stack.extend((c, f"{path}.{k}" if _PLAIN.fullmatch(str(k)) else f"{path}[{k!r}]") for k, c in v.items())
        elif t is list:
            stack.extend((c, f"{path}[{i}]") for i, c in enumerate(v))
        elif (t is float and not math.isfinite(v)) or (t is int and abs(v) > _MAX_DOUBLE):
            shown = repr(v) if t is float else f"an integer of {len(str(abs(v)))} digits"
            raise PydanticCustomError(
                NON_FINITE,
                "HATP-OBJ-4: {shown} at {where} is not a finite number a double holds",
                {"where": path.lstrip(".") or "the value", "shown": shown},
            )
    return value


def _all_finite(value: Any) -> bool:
    stack: list[Any] = [value]
    pop = stack.pop
    push = stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is dict:
            push(v.values())
        elif t is list:
            push(v)
        elif t is float:
            if v - v != 0.0:  # NaN or an infinity
                return False
        elif t is int and not -_MAX_DOUBLE <= v <= _MAX_DOUBLE:
            return False
    return True


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
DecimalStr = Annotated[
    str,
    BeforeValidator(_check_decimal),
    WithJsonSchema(
        {"type": "string", "pattern": _DEC.pattern, "description": 'An exact decimal as a string, e.g. "12.50".'}
    ),
]
# A JSON object carried as it is (tool arguments, record bodies, evidence as received): its numbers must be finite.
JsonObject = Annotated[dict[str, Any], AfterValidator(_check_finite)]
Ident = Annotated[
    str,
    AfterValidator(_check_ident),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": _IDENT.pattern,
            "description": "An identifier: letters, digits and ._:@/+- , at most 128 characters.",
        }
    ),
]
Seconds = Annotated[int, Field(ge=0, le=10 * 365 * 24 * 3600)]


class WireModel(BaseModel):
    """Strict, frozen, camelCase. `wire()` is the normalized JSON form that digests and signatures cover."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        validate_default=False,
    )

    def wire(self) -> dict[str, Any]:
        """The JSON object on the wire: camelCase, members that are None omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def canonical(self) -> bytes:
        return canonical(self.wire())

    def digest(self) -> str:
        """`sha256:<hex>` of the canonical wire form."""
        return digest(self.wire())

    @classmethod
    def from_wire(cls, data: Any) -> Self:
        """Validate a parsed JSON value. Raises pydantic.ValidationError (see hatp_mcp.core.wire.parse)."""
        return cls.model_validate(data)


class Signature(WireModel):
    """``{alg, kid, sig}``: an Ed25519 signature (base64url) over the canonical object without this member."""

    alg: str
    kid: str
    sig: str


class SignedModel(WireModel):
    """A wire object that carries a signature. Sign and verify with hatp_mcp.core.signing."""

    signature: Signature | None = None

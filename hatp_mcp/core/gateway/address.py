"""HATP addresses: who a request goes to (`human://`) and who wrote it (`agent://`). Pure parsing, no IO.

Forms (spec/gateway.md, HATP-ADDR-1..4):
- ``human://acme.com/bob``                                  one person
- ``human://acme.com/role/finance-approver?quorum=2-of-3``  any M of N holders of a role
- ``human://acme.com/pool/security-leads?skill=sox``        holders of a pool, filtered by a skill
- ``agent://acme.com/travel-bot``                           an agent (never an approver)

This module only parses and prints; it must not look anyone up (that is core/gateway/directory.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import Enum

from hatp_mcp.errors import HatpError

__all__ = ["Address", "AddressError", "Kind", "parse_address", "person_address"]

_ORG = re.compile(r"^(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_QUORUM = re.compile(r"^([1-9][0-9]{0,2})-of-([1-9][0-9]{0,2})$")
_MAX_QUORUM = 100
# Which query parameters each group form accepts; anything else is refused, never ignored.
_PARAMS = {"quorum", "skill", "passkey"}


class Kind(Enum):
    PERSON = "person"
    ROLE = "role"
    POOL = "pool"
    AGENT = "agent"


class AddressError(HatpError):
    """A malformed or misused address (HATP-ADDR-1..4)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Address:
    """A parsed address. `quorum` is (M, N) for groups that asked for one; `passkey` means holders need a passkey."""

    raw: str
    kind: Kind
    org: str
    name: str
    quorum: tuple[int, int] | None = None
    skill: str | None = None
    passkey: bool = False

    @property
    def is_human(self) -> bool:
        return self.kind is not Kind.AGENT

    @property
    def is_group(self) -> bool:
        return self.kind in (Kind.ROLE, Kind.POOL)


def person_address(org: str, name: str) -> str:
    """The canonical address of one person, e.g. ``human://acme.com/alice``."""
    return f"human://{org}/{name}"


def _fail(rule: str, raw: str, reason: str, path: str, fix: str) -> AddressError:
    return AddressError(rule, f"address {raw!r}: {reason}", path=path, fix=fix, code="BAD_ADDRESS")


def parse_address(raw: str, path: str = "$") -> Address:
    """Parse an address. Raises AddressError: HATP-ADDR-1 (grammar), HATP-ADDR-2 (quorum), HATP-ADDR-3 (params).

    An address parsed once is remembered (the Address is frozen; a gated call parses its requirement's address
    and its requester's every time): only an exact `str`, by its exact text, so nothing that merely compares
    equal to it shares its entry. A refusal is never remembered: it is raised again, with this call's `path`."""
    if type(raw) is str:
        try:
            return _parsed(raw)
        except AddressError:
            pass  # refused: parsed again below, so that the refusal names this call's path
    return _parse(raw, path)


_PARSED_MAX = 1024  # distinct addresses remembered; the least recently used is forgotten first


@functools.lru_cache(maxsize=_PARSED_MAX)
def _parsed(raw: str) -> Address:
    return _parse(raw, "$")  # lru_cache remembers only what returns: a raise is not kept


def _parse(raw: str, path: str) -> Address:
    forms = (
        "human://ORG/NAME, human://ORG/role/ROLE[?quorum=M-of-N], human://ORG/pool/POOL[?skill=S] or agent://ORG/NAME"
    )
    if not isinstance(raw, str) or len(raw) > 500:
        raise _fail("HATP-ADDR-1", str(raw)[:60], "is not a string of at most 500 characters", path, f"write {forms}")
    scheme, sep, rest = raw.partition("://")
    if not sep or scheme not in ("human", "agent"):
        raise _fail("HATP-ADDR-1", raw, "the scheme must be human:// or agent://", path, f"write {forms}")
    body, qmark, query = rest.partition("?")
    parts = body.split("/")
    org = parts[0]
    if not _ORG.fullmatch(org):
        raise _fail("HATP-ADDR-1", raw, f"{org!r} is not a lower-case domain name", path, "name the organisation")
    segs = parts[1:]
    if scheme == "agent" or len(segs) == 1:
        if len(segs) != 1 or not _NAME.fullmatch(segs[0]):
            raise _fail("HATP-ADDR-1", raw, "the name must be one lower-case segment", path, f"write {forms}")
        if qmark:
            raise _fail("HATP-ADDR-3", raw, "a person or agent address takes no parameters", path, "drop the '?...'")
        if segs[0] in ("role", "pool"):
            raise _fail("HATP-ADDR-1", raw, f"{segs[0]!r} needs a name after it", path, f"write {forms}")
        kind = Kind.AGENT if scheme == "agent" else Kind.PERSON
        return Address(raw=raw, kind=kind, org=org, name=segs[0])
    if len(segs) != 2 or segs[0] not in ("role", "pool") or not _NAME.fullmatch(segs[1]):
        raise _fail("HATP-ADDR-1", raw, "a group is role/NAME or pool/NAME, lower-case", path, f"write {forms}")
    kind = Kind.ROLE if segs[0] == "role" else Kind.POOL
    params: dict[str, str] = {}
    if qmark:
        for item in query.split("&"):
            key, eq, value = item.partition("=")
            if key not in _PARAMS or not eq or not value:
                raise _fail(
                    "HATP-ADDR-3", raw, f"unknown or empty parameter {item!r}", path, f"use only {sorted(_PARAMS)}"
                )
            if key in params:
                raise _fail("HATP-ADDR-3", raw, f"parameter {key!r} given twice", path, "give each parameter once")
            params[key] = value
    quorum: tuple[int, int] | None = None
    if "quorum" in params:
        m = _QUORUM.fullmatch(params["quorum"])
        if not m:
            raise _fail("HATP-ADDR-2", raw, "quorum must read M-of-N, e.g. 2-of-3", path, "write quorum=M-of-N")
        need, of = int(m.group(1)), int(m.group(2))
        if need > of or of > _MAX_QUORUM:
            raise _fail("HATP-ADDR-2", raw, f"quorum {need}-of-{of} needs 1 <= M <= N <= 100", path, "fix M or N")
        quorum = (need, of)
    skill = params.get("skill")
    if skill is not None and not _NAME.fullmatch(skill):
        raise _fail("HATP-ADDR-3", raw, f"skill {skill!r} is not a lower-case name", path, "name one skill")
    passkey = params.get("passkey")
    if passkey is not None and passkey != "required":
        raise _fail("HATP-ADDR-3", raw, "passkey takes only the value 'required'", path, "write passkey=required")
    return Address(raw=raw, kind=kind, org=org, name=segs[1], quorum=quorum, skill=skill, passkey=passkey is not None)

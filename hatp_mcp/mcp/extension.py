"""Advertising HATP in an MCP server's capabilities, and reading the advertisement on the client side.

A server speaking HATP puts one object under `capabilities.extensions["ai.probita/human-gateway"]` (2026-07-28
clients) and the same object under `capabilities.experimental["hatp"]` (legacy clients, whose InitializeResult
has no `extensions`). This module builds that object and installs it on a low-level `Server`; it registers no
methods (participant_server does) and does no IO.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types
from mcp.server import Server

from hatp_mcp.errors import HatpError

__all__ = [
    "EXPERIMENTAL_KEY",
    "EXTENSION_ID",
    "REVISION",
    "HatpSettings",
    "OperationInfo",
    "advertise",
    "read_advertisement",
]

EXTENSION_ID = "ai.probita/human-gateway"
EXPERIMENTAL_KEY = "hatp"
REVISION = "1"


@dataclass(frozen=True)
class OperationInfo:
    """What a participant offers for one operation: its tier and the longest lease and hold it grants."""

    tier: str
    max_lease_seconds: int | None = None
    max_hold_seconds: int | None = None
    max_duration_seconds: int | None = None  # the longest one call (prepare or commit) takes

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tier": self.tier}
        if self.max_lease_seconds is not None:
            out["maxLeaseSeconds"] = self.max_lease_seconds
        if self.max_hold_seconds is not None:
            out["maxHoldSeconds"] = self.max_hold_seconds
        if self.max_duration_seconds is not None:
            out["maxDurationSeconds"] = self.max_duration_seconds
        return out


@dataclass(frozen=True)
class HatpSettings:
    """The HATP advertisement of one server: protocol version, roles, operations and public signing keys."""

    roles: Sequence[str]
    operations: Mapping[str, OperationInfo] = field(default_factory=dict)
    keys: Sequence[Mapping[str, Any]] = ()
    version: str = "1"

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": REVISION,
            "hatp": {
                "version": self.version,
                "roles": list(self.roles),
                "operations": {name: op.to_json() for name, op in self.operations.items()},
                "keys": [dict(k) for k in self.keys],
            },
        }


def advertise(server: Server[Any], settings: HatpSettings) -> None:
    """HATP-MCP-1: put the advertisement under both `extensions[EXTENSION_ID]` and `experimental["hatp"]`.

    `create_initialization_options(experimental_capabilities=...)` is not enough: the HTTP session manager and
    `server/discover` call `get_capabilities()` themselves, so the instance's method is wrapped.
    """
    body = settings.to_json()
    server.extensions[EXTENSION_ID] = body
    original = server.get_capabilities

    def get_capabilities(*args: Any, **kwargs: Any) -> types.ServerCapabilities:
        caps = original(*args, **kwargs)
        experimental = {**(caps.experimental or {}), EXPERIMENTAL_KEY: body}
        return caps.model_copy(update={"experimental": experimental})

    server.get_capabilities = get_capabilities  # type: ignore[method-assign]


def read_advertisement(caps: types.ServerCapabilities | None, server: str = "server") -> dict[str, Any]:
    """The `hatp` member of a server's advertisement (extensions first, then experimental).

    Raises HatpError HATP-MCP-1 when the server advertises no HATP, or another revision.
    """
    found: Any = None
    if caps is not None:
        found = (caps.extensions or {}).get(EXTENSION_ID) or (caps.experimental or {}).get(EXPERIMENTAL_KEY)
    if not isinstance(found, Mapping) or not isinstance(found.get("hatp"), Mapping):
        raise HatpError(
            "HATP-MCP-1",
            f"{server} does not advertise HATP (capabilities.extensions[{EXTENSION_ID!r}])",
            path=f"$.capabilities.extensions[{EXTENSION_ID!r}]",
            code="UNSUPPORTED",
            fix="connect to a server started with serve_hatp()",
        )
    if found.get("revision") != REVISION:
        raise HatpError(
            "HATP-MCP-1",
            f"{server} speaks HATP revision {found.get('revision')!r}, not {REVISION!r}",
            path=f"$.capabilities.extensions[{EXTENSION_ID!r}].revision",
            code="UNSUPPORTED",
        )
    return dict(found["hatp"])

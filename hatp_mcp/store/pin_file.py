"""A pin file: a JWKS of public keys an operator pinned, each bound to the party it speaks for (HATP-MCP-37).

It is what a coordinator's `--participant-keys URI=FILE` and a receiver's `trusted-coordinators.json` read. Keys
are only ever added here, by an operator step (`hatp trust add`, `hatp init-org`), never by a server at start.
Adding a key that is already pinned, bound to the same party, leaves the file untouched (not even rewritten);
a key that conflicts with a pinned one (the same kid with other key bytes, or the same key bound to another party)
is refused and nothing is written. The file is written in one step (hatp_mcp.store.files).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.errors import HatpError
from hatp_mcp.store.files import read_json_file, replace_file

__all__ = ["add_pins", "read_pins"]


def read_pins(path: Path) -> Keyring:
    """The keys pinned in `path` (a JWKS), none when it does not exist. Raises ValueError (not a JWKS of Ed25519
    public keys) or OSError."""
    if not path.exists():
        return Keyring()
    doc: Any = read_json_file(path)
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: a pin file is a JWKS {{'keys': [...]}}")
    return Keyring.from_jwks(doc)


def _conflict(path: Path, reason: str) -> HatpError:
    return HatpError(
        "HATP-MCP-37",
        f"{path}: {reason}",
        path="$.keys",
        fix="a pinned key is replaced only on purpose: remove the old entry from the file yourself, then add again",
        code="PIN_CONFLICT",
    )


def add_pins(path: Path, entries: Iterable[PublicKeyEntry]) -> list[PublicKeyEntry]:
    """Pin `entries` (each already bound to its party) in `path`, creating it (mode 0644). Returns the entries that
    were new; none new: the file is not written at all.

    Raises HatpError HATP-MCP-37 (code PIN_CONFLICT: a kid pinned with other key bytes, or bound to another party;
    nothing written), ValueError (an unreadable pin file, an entry bound to no party) or OSError."""
    ring = read_pins(path)
    added: list[PublicKeyEntry] = []
    for entry in entries:
        if entry.party is None:
            raise ValueError(f"key {entry.kid!r} is bound to no party; a pin names whom the key speaks for")
        old = ring.get(entry.kid)
        if old is not None and old.raw() != entry.raw():
            raise _conflict(path, f"kid {entry.kid!r} is already pinned to other key bytes")
        if old is not None and old.party != entry.party:
            raise _conflict(path, f"key {entry.kid!r} is pinned for {old.party!r}, not {entry.party!r}")
        if old is not None and old.roles != entry.roles:
            raise _conflict(path, f"key {entry.kid!r} is pinned with roles {list(old.roles)}, not {list(entry.roles)}")
        if old is None:
            ring.add(entry)
            added.append(entry)
    if added:
        replace_file(path, json.dumps(ring.to_jwks(), indent=2) + "\n", 0o644)
    return added

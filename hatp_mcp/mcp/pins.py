"""Which keys a coordinator trusts for each participant (spec/mcp-binding.md HATP-MCP-27, HATP-MCP-28).

Pinned: the operator names a participant's keys (a JWKS or single-JWK file, such as the `public.jwk.json` a server
writes under its --data, or the same inline); at connect the keys the participant advertises must all be among
them, and only the pinned keys count. Trust on first use, only when the operator asks for it: the keys first
advertised are written under the coordinator's data dir and pinned from then on. A participant with neither is
refused before anything is sent to it. Every key returned is bound to the participant it was pinned for (its entry's
`party`, HATP-SIG-6), so the coordinator core counts it only for that participant's branches. This module decides
nothing about transactions; it reads and writes only
key files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.errors import BrokenInvariant, HatpError, TransportFailed
from hatp_mcp.mcp.server_links import Link, advertised_keyring
from hatp_mcp.store.files import create_file

__all__ = ["KeySource", "check_pinned", "describe", "participant_keyring", "read_keys", "tofu_file", "unpinned"]

KeySource = Path | Mapping[str, Any]  # a key file, or the keys inline (a JWKS or one JWK)


def describe(source: KeySource) -> str:
    return str(source) if isinstance(source, Path) else "the inline keys"


def read_keys(source: KeySource) -> Keyring:
    """The keys of a JWKS (``{"keys": [...]}``) or of one JWK, from a file or inline.

    Raises OSError (an unreadable file) or ValueError (not JSON, not Ed25519 public JWKs)."""
    doc: Any = json.loads(source.read_text()) if isinstance(source, Path) else source
    if not isinstance(doc, Mapping):
        raise ValueError(f"{describe(source)}: expected a JWKS {{'keys': [...]}} or one JWK")
    if "keys" in doc:
        return Keyring.from_jwks(doc)
    return Keyring([PublicKeyEntry.from_jwk(doc)])


def check_pinned(name: str, advertised: Keyring, pinned: Keyring, role: str, where: str) -> Keyring:
    """HATP-MCP-27: the pinned keys of `name` that may sign as `role`, bound to `name` (HATP-SIG-6), once every key
    it advertised is among them (same kid, same key). Raises HatpError HATP-MCP-27 (code KEY_NOT_PINNED) naming the
    first key that is not, when no pinned key may sign as `role`, or when a pinned key names another party."""
    for kid in _kids(advertised):
        got, want = advertised.get(kid), pinned.get(kid)
        if want is None or got is None or want.raw() != got.raw():
            raise HatpError(
                "HATP-MCP-27",
                f"{name} advertises key {kid!r}, which is not among the keys pinned for it ({where})",
                path=f"$.capabilities.hatp.keys[?(@.kid=={json.dumps(kid)})]",
                fix="pin the participant's current public key (its --data/public.jwk.json), or reach the right server",
                code="KEY_NOT_PINNED",
            )
    ring = _bound(name, Keyring(e for e in pinned.entries() if role in e.roles), where)
    if len(ring) == 0:
        raise HatpError(
            "HATP-MCP-27",
            f"none of the keys pinned for {name} ({where}) may sign as {role!r}",
            path="$.keys",
            fix=f"pin the participant's public key with roles [{role!r}]",
            code="KEY_NOT_PINNED",
        )
    return ring


def _kids(ring: Keyring) -> list[str]:
    return [e.kid for e in ring.entries()]


def _bound(name: str, ring: Keyring, where: str) -> Keyring:
    try:
        return ring.bound_to(name)
    except ValueError as exc:
        raise HatpError(
            "HATP-MCP-27",
            f"a key pinned for {name} ({where}) speaks for another party: {exc}",
            path="$.keys",
            fix=f"pin {name}'s own keys (a key entry's 'party', when present, must be {name})",
            code="KEY_NOT_PINNED",
        ) from exc


def unpinned(name: str) -> HatpError:
    """HATP-MCP-28: the refusal of a participant whose keys are not pinned, trust on first use not allowed."""
    return HatpError(
        "HATP-MCP-28",
        f"no keys are pinned for {name}: its evidence would be checked against whatever keys it advertises",
        path=f"$.participants[{json.dumps(name)}].keys",
        fix="give its keys (CONFIG participants.URI.keys, or --participant-keys URI=FILE), or allow trust on "
        "first use with --trust-advertised-keys",
        code="KEYS_NOT_PINNED",
    )


def tofu_file(data: Path, name: str) -> Path:
    """Where the keys first advertised by `name` are kept when trust on first use is allowed."""
    return data / "trusted-keys" / f"{quote(name, safe='')}.jwks.json"


async def participant_keyring(
    name: str,
    link: Link,
    role: str,
    *,
    pinned: KeySource | None,
    trust_dir: Path | None,
    on_unreachable: Callable[[str], None] | None = None,
) -> Keyring:
    """The keys that count for participant `name` on `link`, each bound to `name` (HATP-SIG-6): its pinned keys
    (HATP-MCP-27); without them, when
    `trust_dir` is given (trust on first use allowed), the keys kept there from the first connect, or the ones it
    advertises now, which are then kept (HATP-MCP-28).

    A participant with pinned (or kept) keys that cannot be reached now counts with those keys alone, its
    advertisement not compared, and `on_unreachable` is told so (HATP-MCP-27): a coordinator must start to
    finish its transactions while one of its participants is down, and its evidence is checked against the pins
    whatever it advertises.

    Raises HatpError HATP-MCP-27 (an advertised key not pinned), HATP-MCP-28 (no pinned keys and trust on first
    use not allowed; nothing is sent to the participant), HATP-MCP-1 / TransportFailed (from the connection, when
    no keys are pinned or kept), OSError or ValueError (an unreadable key file)."""
    if pinned is None and trust_dir is None:
        raise unpinned(name)
    kept = tofu_file(trust_dir, name) if trust_dir is not None else None
    try:
        advertised = await advertised_keyring(link, role)
    except TransportFailed as exc:
        if pinned is None and (kept is None or not kept.exists()):
            raise
        if pinned is not None:
            source, keys = describe(pinned), read_keys(pinned)
        else:
            if kept is None:
                raise BrokenInvariant(f"{name}: neither a pin nor a kept key file") from exc
            source, keys = f"first seen, kept in {kept}", read_keys(kept)
        ring = check_pinned(name, Keyring(), keys, role, source)
        if on_unreachable is not None:
            on_unreachable(
                f"{name} is unreachable now ({exc.reason}): its evidence counts only with the keys pinned for it "
                f"({source}); what it advertises was NOT compared with them (HATP-MCP-27) and is not until it is "
                "reached again at the next start"
            )
        return ring
    if pinned is not None:
        return check_pinned(name, advertised, read_keys(pinned), role, describe(pinned))
    if kept is None:
        raise BrokenInvariant(f"{name}: neither a pin nor a kept key file")
    if kept.exists():
        return check_pinned(name, advertised, read_keys(kept), role, f"first seen, kept in {kept}")
    if len(advertised) == 0:
        raise HatpError(
            "HATP-MCP-27",
            f"{name} advertises no key that may sign as {role!r}",
            path="$.capabilities.hatp.keys",
            code="KEY_NOT_PINNED",
        )
    bound = _bound(name, advertised, "first seen")
    if not create_file(kept, json.dumps(bound.to_jwks()), 0o644):  # another connect kept its keys first
        return check_pinned(name, advertised, read_keys(kept), role, f"first seen, kept in {kept}")
    return bound

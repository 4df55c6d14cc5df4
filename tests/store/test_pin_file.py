"""Pin files: keys added by an operator step only, each bound to its party; the same key again changes nothing (not
even the file's mtime); a conflicting key is refused and nothing is written (HATP-MCP-37)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.core.signing.keys import PublicKeyEntry, SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.store.pin_file import add_pins, read_pins

SHOP = "mcp://shop.example/hatp"


def entry(key: SigningKey, party: str = SHOP) -> PublicKeyEntry:
    return PublicKeyEntry.from_jwk(key.public_jwk(party))


def test_HATP_MCP_37_a_key_pinned_again_for_the_same_party_leaves_the_file_untouched(tmp_path: Path) -> None:
    pins = tmp_path / "shop.jwks.json"
    key = SigningKey.generate(["participant"])
    assert add_pins(pins, [entry(key)]) == [entry(key)]
    stamp = (pins.read_bytes(), pins.stat().st_mtime_ns)
    assert add_pins(pins, [entry(key)]) == []
    assert (pins.read_bytes(), pins.stat().st_mtime_ns) == stamp
    [pinned] = read_pins(pins).entries()
    assert (pinned.kid, pinned.party, pinned.roles) == (key.kid, SHOP, ("participant",))


@pytest.mark.parametrize("conflict", ["other bytes", "other party"])
def test_HATP_MCP_37_a_key_that_conflicts_with_a_pinned_one_is_refused_and_nothing_is_written(
    tmp_path: Path, conflict: str
) -> None:
    pins = tmp_path / "shop.jwks.json"
    key = SigningKey.generate(["participant"])
    add_pins(pins, [entry(key)])
    before = pins.read_bytes()
    if conflict == "other bytes":  # the same kid, another key: someone swapping the participant's key
        planted = entry(SigningKey(key.kid, SigningKey.generate().private, key.roles))
        reason = "already pinned to other key bytes"
    else:
        planted, reason = entry(key, "mcp://evil.example/hatp"), f"is pinned for {SHOP!r}"
    newcomer = entry(SigningKey.generate(["participant"]))
    with pytest.raises(HatpError) as refused:
        add_pins(pins, [newcomer, planted])
    assert (refused.value.rule, refused.value.code) == (
        "HATP-MCP-37",
        "PIN_CONFLICT",
    ) and reason in refused.value.reason
    assert pins.read_bytes() == before  # not even the newcomer before it
    assert json.loads(before)["keys"][0]["kid"] == key.kid


def test_a_key_bound_to_no_party_is_not_pinned(tmp_path: Path) -> None:
    bare = PublicKeyEntry.from_jwk(SigningKey.generate(["participant"]).public_jwk())
    with pytest.raises(ValueError, match="bound to no party"):
        add_pins(tmp_path / "p.json", [bare])
    assert not (tmp_path / "p.json").exists()

"""`hatp trust add`: the operator pins a participant's public key (or a coordinator's, into a receiver's trust list),
bound to its party (HATP-MCP-37)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.runtime.coordinator_trust import load_trust_list
from hatp_mcp.store.pin_file import read_pins

SHOP = "mcp://shop.example/hatp"


def public(tmp_path: Path, name: str, *roles: str) -> tuple[SigningKey, Path]:
    key = SigningKey.generate(roles)
    path = tmp_path / f"{name}.public.jwk.json"
    path.write_text(json.dumps(key.public_jwk()))  # what its operator sends: the public half only
    return key, path


def test_a_participants_public_key_is_pinned_bound_to_its_uri(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, path = public(tmp_path, "shop", "participant")
    pins = tmp_path / "trust" / "shop.jwks.json"
    assert main(["trust", "add", str(pins), f"{SHOP}={path}", "--role", "participant"]) == 0
    [entry] = read_pins(pins).entries()
    assert (entry.kid, entry.party) == (key.kid, SHOP) and f"pinned {key.kid} for {SHOP}" in capsys.readouterr().out
    assert main(["trust", "add", str(pins), f"{SHOP}={path}"]) == 0
    assert "unchanged" in capsys.readouterr().out


def test_a_coordinators_key_pinned_into_a_receivers_trust_list_is_what_the_receiver_loads(tmp_path: Path) -> None:
    key, path = public(tmp_path, "coordinator", "coordinator")
    trust = tmp_path / "gateway" / "trusted-coordinators.json"
    assert main(["trust", "add", str(trust), f"coordinator://example.org={path}", "--role", "coordinator"]) == 0
    [entry] = load_trust_list(trust).entries()
    assert (entry.kid, entry.party) == (key.kid, "coordinator://example.org")


def test_HATP_MCP_37_a_key_without_the_role_or_in_conflict_is_refused_with_exit_1_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _key, agent = public(tmp_path, "agent", "agent")
    pins = tmp_path / "shop.jwks.json"
    assert main(["trust", "add", str(pins), f"{SHOP}={agent}", "--role", "participant"]) == 1
    assert "lacks the role 'participant'" in capsys.readouterr().err and not pins.exists()
    _key, shop = public(tmp_path, "shop", "participant")
    assert main(["trust", "add", str(pins), f"{SHOP}={shop}"]) == 0
    before = pins.read_bytes()
    assert main(["trust", "add", str(pins), f"mcp://other.example/hatp={shop}"]) == 1
    assert "HATP-MCP-37" in capsys.readouterr().err and pins.read_bytes() == before


def test_a_key_without_a_party_is_a_bad_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _key, path = public(tmp_path, "shop", "participant")
    assert main(["trust", "add", str(tmp_path / "p.json"), str(path)]) == 2
    assert "PARTY=KEYFILE" in capsys.readouterr().err

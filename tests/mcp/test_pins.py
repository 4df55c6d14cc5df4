"""Pinned participant keys: the keys a coordinator trusts for a participant are the ones its operator named,
checked against what the participant advertises at connect (HATP-MCP-27); trust on first use only when asked for,
and then kept (HATP-MCP-28). The connects reach a real hotel server started as a stdio child."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SigningKey
from hatp_mcp.errors import HatpError, TransportFailed
from hatp_mcp.mcp import pins
from hatp_mcp.mcp.pins import check_pinned, participant_keyring, read_keys, tofu_file
from hatp_mcp.mcp.server_links import Target, open_links
from hatp_mcp.store.files import create_file

pytestmark = pytest.mark.anyio

HOTEL = "mcp://hotel.example/hatp"


def ring(*keys: SigningKey) -> Keyring:
    return Keyring(PublicKeyEntry.from_jwk(k.public_jwk()) for k in keys)


def test_keys_are_read_from_a_jwks_or_a_single_jwk_file_or_inline(tmp_path: Path) -> None:
    a, b = SigningKey.generate(["participant"]), SigningKey.generate(["participant"])
    (tmp_path / "one.json").write_text(json.dumps(a.public_jwk()))
    (tmp_path / "set.json").write_text(json.dumps(ring(a, b).to_jwks()))
    assert len(read_keys(tmp_path / "one.json")) == 1 and a.kid in read_keys(tmp_path / "one.json")
    assert {a.kid, b.kid} <= {k["kid"] for k in read_keys(tmp_path / "set.json").to_jwks()["keys"]}
    assert b.kid in read_keys(b.public_jwk())
    with pytest.raises(ValueError):
        read_keys({"kty": "RSA", "kid": "x"})


def test_HATP_MCP_27_an_advertised_key_outside_the_pinned_ones_is_refused_naming_it() -> None:
    pinned, other = SigningKey.generate(["participant"]), SigningKey.generate(["participant"])
    assert pinned.kid in check_pinned(HOTEL, ring(pinned), ring(pinned), "participant", "hotel.jwk")
    with pytest.raises(HatpError) as info:
        check_pinned(HOTEL, ring(pinned, other), ring(pinned), "participant", "hotel.jwk")
    assert (info.value.rule, info.value.code) == ("HATP-MCP-27", "KEY_NOT_PINNED")
    assert other.kid in info.value.reason and "hotel.jwk" in info.value.reason


def test_HATP_MCP_27_a_key_with_a_pinned_kid_but_other_bytes_is_refused() -> None:
    pinned = SigningKey.generate(["participant"])
    impostor = SigningKey.generate(["participant"], kid=pinned.kid)
    with pytest.raises(HatpError) as info:
        check_pinned(HOTEL, ring(impostor), ring(pinned), "participant", "hotel.jwk")
    assert info.value.rule == "HATP-MCP-27"


def test_HATP_MCP_27_only_pinned_keys_of_the_role_count_and_none_of_the_role_is_refused() -> None:
    part, coord = SigningKey.generate(["participant"]), SigningKey.generate(["coordinator"])
    counted = check_pinned(HOTEL, Keyring(), ring(part, coord), "participant", "keys")
    assert part.kid in counted and coord.kid not in counted
    with pytest.raises(HatpError) as info:
        check_pinned(HOTEL, Keyring(), ring(coord), "participant", "keys")
    assert info.value.rule == "HATP-MCP-27"


def test_HATP_SIG_6_pinned_keys_come_back_bound_to_the_participant_and_a_key_of_another_party_is_refused() -> None:
    key = SigningKey.generate(["participant"])
    counted = check_pinned(HOTEL, ring(key), ring(key), "participant", "hotel.jwk")
    assert [e.party for e in counted.entries()] == [HOTEL]  # the core counts it for the hotel's branches only
    airlines = Keyring([PublicKeyEntry.from_jwk(key.public_jwk("mcp://airline.example/hatp"))])
    with pytest.raises(HatpError) as info:
        check_pinned(HOTEL, ring(key), airlines, "participant", "hotel.jwk")
    assert (info.value.rule, info.value.code) == ("HATP-MCP-27", "KEY_NOT_PINNED")
    assert "airline.example" in info.value.reason


async def test_HATP_MCP_27_the_hotels_own_public_key_file_pins_it_and_a_foreign_key_file_refuses_it(
    tmp_path: Path,
) -> None:
    foreign = tmp_path / "foreign.jwk.json"
    foreign.write_text(json.dumps(SigningKey.generate(["participant"]).public_jwk()))
    with anyio.fail_after(60):
        async with open_links({HOTEL: Target(module="servers.hotel", data=str(tmp_path / "hotel"))}, tmp_path) as links:
            own = await participant_keyring(
                HOTEL, links[HOTEL], "participant", pinned=tmp_path / "hotel" / "public.jwk.json", trust_dir=None
            )
            with pytest.raises(HatpError) as info:
                await participant_keyring(HOTEL, links[HOTEL], "participant", pinned=foreign, trust_dir=None)
    hotel_key = json.loads((tmp_path / "hotel" / "public.jwk.json").read_text())
    assert [(e.kid, e.party) for e in own.entries()] == [(hotel_key["kid"], HOTEL)]
    assert (info.value.rule, info.value.code) == ("HATP-MCP-27", "KEY_NOT_PINNED")
    assert hotel_key["kid"] in info.value.reason


async def test_HATP_MCP_28_without_pinned_keys_nothing_is_sent_unless_trust_on_first_use_is_allowed(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with open_links({HOTEL: Target(module="servers.hotel", data=str(tmp_path / "hotel"))}, tmp_path) as links:
            with pytest.raises(HatpError) as info:
                await participant_keyring(HOTEL, links[HOTEL], "participant", pinned=None, trust_dir=None)
            assert links[HOTEL].connects == 0  # refused before the participant was reached
            first = await participant_keyring(HOTEL, links[HOTEL], "participant", pinned=None, trust_dir=tmp_path)
            kept = tofu_file(tmp_path, HOTEL)
            assert read_keys(kept).to_jwks() == first.to_jwks()  # the first seen keys are kept ...
            assert [e.party for e in first.entries()] == [HOTEL]  # ... bound to the hotel (HATP-SIG-6) ...
            kept.write_text(json.dumps(SigningKey.generate(["participant"]).public_jwk()))
            with pytest.raises(HatpError) as changed:  # ... and pinned from then on: a changed key is refused
                await participant_keyring(HOTEL, links[HOTEL], "participant", pinned=None, trust_dir=tmp_path)
    assert (info.value.rule, info.value.code) == ("HATP-MCP-28", "KEYS_NOT_PINNED")
    assert "--trust-advertised-keys" in info.value.fix
    assert changed.value.rule == "HATP-MCP-27"


async def test_HATP_MCP_28_a_racing_first_connect_that_kept_other_keys_wins_and_this_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = SigningKey.generate(["participant"])
    kept = tofu_file(tmp_path, HOTEL)

    def raced(path: Path, text: str, mode: int = 0o600) -> bool:  # another connect keeps its keys first
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(other.public_jwk()))
        return create_file(path, text, mode)

    monkeypatch.setattr(pins, "create_file", raced)
    with anyio.fail_after(60):
        async with open_links({HOTEL: Target(module="servers.hotel", data=str(tmp_path / "hotel"))}, tmp_path) as links:
            with pytest.raises(HatpError) as info:
                await participant_keyring(HOTEL, links[HOTEL], "participant", pinned=None, trust_dir=tmp_path)
    assert info.value.rule == "HATP-MCP-27"  # the kept keys are the first writer's, and the hotel's are not them
    assert read_keys(kept).to_jwks()["keys"][0]["kid"] == other.kid


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens there


async def test_HATP_MCP_27_a_pinned_participant_down_at_start_counts_with_its_pins_and_says_nothing_was_compared(
    tmp_path: Path,
) -> None:
    pinned = SigningKey.generate(["participant"])
    said: list[str] = []
    down = Target(url=f"http://127.0.0.1:{_closed_port()}/mcp")
    with anyio.fail_after(30):
        async with open_links({HOTEL: down}, tmp_path) as links:
            got = await participant_keyring(
                HOTEL,
                links[HOTEL],
                "participant",
                pinned=pinned.public_jwk(),
                trust_dir=None,
                on_unreachable=said.append,
            )
            with pytest.raises(TransportFailed):  # nothing pinned or kept: nothing to count with
                await participant_keyring(HOTEL, links[HOTEL], "participant", pinned=None, trust_dir=tmp_path)
    assert got.get(pinned.kid) is not None and got.get(pinned.kid).party == HOTEL  # type: ignore[union-attr]
    assert len(said) == 1 and HOTEL in said[0] and "NOT compared" in said[0] and "HATP-MCP-27" in said[0]

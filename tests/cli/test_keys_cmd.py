"""`hatp keys ring`: a keyring from private JWKs, public JWKs or JWKS (a third party has only public keys),
optionally bound to their parties, that `hatp verify` checks a record with; private material never printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.cli import main
from tests.factories import PARTIES, signed_trip_record

AIRLINE = "mcp://airline.example/hatp"


def write(tmp_path: Path, name: str, value: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


def ring(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["keys", "ring", *args]) == 0, capsys.readouterr().err
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_a_ring_of_public_jwks_bound_to_their_parties_verifies_a_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record, _ring, keys = signed_trip_record()
    files = {name: write(tmp_path, f"{name}.jwk", key.public_jwk()) for name, key in keys.items()}  # public only
    args = [f"{PARTIES[name]}={path}" if name in PARTIES else path for name, path in files.items()]
    built = ring(args, capsys)
    assert {k["kid"]: k.get("party") for k in built["keys"]} == {
        key.kid: PARTIES.get(name) for name, key in keys.items()
    }
    keyring = write(tmp_path, "ring.json", built)
    assert main(["verify", write(tmp_path, "record.json", record), "--keys", keyring]) == 0
    capsys.readouterr()
    swapped = [a.replace(AIRLINE, "mcp://elsewhere.example/hatp") for a in args]
    wrong = ring(swapped, capsys)
    assert main(["verify", str(tmp_path / "record.json"), "--keys", write(tmp_path, "wrong.json", wrong)]) == 1
    assert "HATP-SIG-6" in capsys.readouterr().out  # the airline's key bound elsewhere does not count for it


def test_private_jwks_and_jwks_give_the_same_public_keys_and_never_the_private_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _record, _ring, keys = signed_trip_record()
    private = write(tmp_path, "coord.private.jwk", keys["coordinator"].private_jwk())
    public = write(tmp_path, "coord.jwk", keys["coordinator"].public_jwk())
    jwks = write(tmp_path, "ring.json", {"keys": [keys["participant"].private_jwk(), keys["gateway"].public_jwk()]})
    from_private = ring([private], capsys)
    assert from_private == ring([public], capsys) == {"keys": [keys["coordinator"].public_jwk()]}
    merged = ring([private, jwks], capsys)
    assert [k["kid"] for k in merged["keys"]] == ["coord-1", "airline-1", "gw-1"]
    assert '"d"' not in json.dumps(merged)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ([1, 2], "a key file is a JSON object"),
        ({"kty": "RSA", "kid": "k"}, "kty OKP and crv Ed25519"),
        ({"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": "AAAA"}]}, "keys[0]"),
    ],
)
def test_a_file_that_holds_no_usable_key_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: Any, said: str
) -> None:
    path = write(tmp_path, "bad.jwk", content)
    assert main(["keys", "ring", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and "bad.jwk" in err


def test_a_private_jwk_whose_halves_do_not_match_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _record, _ring, keys = signed_trip_record()
    mixed = keys["coordinator"].private_jwk() | {"x": keys["gateway"].public_jwk()["x"]}
    assert main(["keys", "ring", write(tmp_path, "mixed.jwk", mixed)]) == 2
    assert "does not match" in capsys.readouterr().err


def test_two_different_keys_under_one_kid_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _record, _ring, keys = signed_trip_record()
    one = write(tmp_path, "one.jwk", keys["coordinator"].public_jwk())
    other = write(tmp_path, "other.jwk", keys["gateway"].public_jwk() | {"kid": "coord-1"})
    assert main(["keys", "ring", one, other]) == 2
    assert "share kid 'coord-1'" in capsys.readouterr().err

"""servers.coordinator's command line: where participants and the gateway are; bad input exits 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.cli import main as hatp
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.mcp.server_links import Target
from servers.coordinator import _parser, main, read_setup
from tests.cli.test_mcp_config_cmd import org_with_agent


def test_a_config_file_and_flags_name_the_participants_and_the_gateway(tmp_path: Path) -> None:
    config = tmp_path / "suite.json"
    config.write_text(
        json.dumps(
            {
                "participants": {"mcp://hotel.example/hatp": "stdio:servers.hotel:/d/hotel"},
                "gateway": {"url": "http://127.0.0.1:9000/mcp"},
                "gatewayKeys": "/org/human-card.json",
                "gatewayId": "https://acme.com/hatp/gateway",
                "org": "/org",
            }
        )
    )
    args = _parser().parse_args(
        [
            "--participants",
            str(config),
            "--participant",
            "mcp://airline.example/hatp=http://127.0.0.1:9001/mcp",
            "--trust-advertised-keys",
        ]
    )
    setup = read_setup(args)
    assert setup.participants == {
        "mcp://hotel.example/hatp": Target(module="servers.hotel", data="/d/hotel"),
        "mcp://airline.example/hatp": Target(url="http://127.0.0.1:9001/mcp"),
    }
    assert setup.gateway == Target(url="http://127.0.0.1:9000/mcp")
    assert (setup.gateway_keys, setup.gateway_id) == (Path("/org/human-card.json"), "https://acme.com/hatp/gateway")
    assert setup.org == Path("/org")


def test_a_gateway_without_the_cards_is_refused_unless_its_word_alone_is_chosen_HATP_TXN_19(tmp_path: Path) -> None:
    base = ["--gateway", "http://127.0.0.1:9000/mcp", "--gateway-keys", "/org/human-card.json"]
    with pytest.raises(ValueError, match="--gateway-id"):  # HATP-SIG-6: its keys speak only as that id
        read_setup(_parser().parse_args(base))
    base += ["--gateway-id", "https://acme.com/hatp/gateway"]
    with pytest.raises(ValueError, match="--org DIR"):
        read_setup(_parser().parse_args(base))
    assert read_setup(_parser().parse_args([*base, "--trust-gateway-decisions"])).org is None
    assert read_setup(_parser().parse_args([*base, "--org", "/org"])).org == Path("/org")


@pytest.mark.parametrize(
    "argv",
    [
        ["--participant", "mcp://hotel.example/hatp"],  # no target
        ["--participant", "mcp://hotel.example/hatp=ftp://x"],  # not a target
        ["--gateway", "http://127.0.0.1:9000/mcp"],  # a gateway whose keys nobody named
        ["--participants", "/nonexistent/suite.json"],
    ],
)
def test_a_wrong_setup_exits_2_with_one_line_and_no_traceback(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coordinator: cannot start:") and "Traceback" not in err


def test_HATP_TXN_33_an_undo_bound_below_one_send_exits_2_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--undo-attempts", "0", "--data", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coordinator: cannot start: HATP-TXN-33") and "--undo-attempts 1" in err
    assert not (tmp_path / "data").exists()  # nothing written


def test_a_participant_that_cannot_be_reached_at_start_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--participant", "mcp://hotel.example/hatp=http://127.0.0.1:9/mcp", "--data", str(tmp_path)]
    assert main([*argv, "--trust-advertised-keys"]) == 2
    assert "HATP-MCP-6" in capsys.readouterr().err


def test_a_participants_keys_are_pinned_in_the_config_by_file_or_inline_and_by_flag(tmp_path: Path) -> None:
    jwk = SigningKey.generate(["participant"]).public_jwk()
    config = tmp_path / "suite.json"
    config.write_text(
        json.dumps(
            {
                "participants": {
                    "mcp://hotel.example/hatp": {
                        "module": "servers.hotel",
                        "data": "/d/h",
                        "keys": "/d/h/public.jwk.json",
                    },
                    "mcp://airline.example/hatp": {"url": "http://127.0.0.1:9001/mcp", "keys": {"keys": [jwk]}},
                    "mcp://payments.example/hatp": "http://127.0.0.1:9002/mcp",
                }
            }
        )
    )
    args = _parser().parse_args(
        ["--participants", str(config), "--participant-keys", "mcp://payments.example/hatp=/d/p/public.jwk.json"]
    )
    setup = read_setup(args)
    assert setup.participant_keys == {
        "mcp://hotel.example/hatp": Path("/d/h/public.jwk.json"),
        "mcp://airline.example/hatp": {"keys": [jwk]},
        "mcp://payments.example/hatp": Path("/d/p/public.jwk.json"),
    }


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--participant", "mcp://hotel.example/hatp=http://127.0.0.1:9/mcp"], "HATP-MCP-28"),  # nothing pinned
        (["--participant-keys", "mcp://hotel.example/hatp=/k.json"], "not a participant"),
        (["--participant", "mcp://h/hatp=http://127.0.0.1:9/mcp", "--participant-keys", "mcp://h/hatp"], "URI=FILE"),
    ],
)
def test_HATP_MCP_28_a_participant_without_pinned_keys_or_a_pin_for_nobody_exits_2_before_reaching_anyone(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coordinator: cannot start:") and said in err and "Traceback" not in err
    assert not (tmp_path / "key.jwk.json").exists()  # refused before the coordinator even made its key


def test_HATP_MCP_27_a_coordinator_whose_participant_advertises_an_unpinned_key_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = tmp_path / "wrong.jwk.json"
    wrong.write_text(json.dumps(SigningKey.generate(["participant"]).public_jwk()))
    argv = [
        "--participant",
        f"mcp://hotel.example/hatp=stdio:servers.hotel:{tmp_path / 'hotel'}",
        "--participant-keys",
        f"mcp://hotel.example/hatp={wrong}",
        "--data",
        str(tmp_path / "coordinator"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    hotel_kid = json.loads((tmp_path / "hotel" / "public.jwk.json").read_text())["kid"]
    assert "HATP-MCP-27" in err and hotel_kid in err and str(wrong) in err and "Traceback" not in err


def test_HATP_MCP_53_the_coordinator_refuses_to_serve_http_without_a_callers_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--transport", "http", "--data", str(tmp_path), "--scripted-approver", "approve"])
    err = capsys.readouterr().err
    assert code == 2 and "--transport http needs --callers FILE" in err and "Traceback" not in err


def test_HATP_TXN_33_hatp_serve_refuses_an_undo_bound_below_one_send_before_it_starts_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = org_with_agent(tmp_path / "org")
    assert hatp(["serve", "--org", str(root), "--undo-attempts", "0"]) == 2
    err = capsys.readouterr().err
    assert "HATP-TXN-33" in err and "--undo-attempts 1" in err
    assert not (root / "data" / "service").exists()  # no lock taken, no child started

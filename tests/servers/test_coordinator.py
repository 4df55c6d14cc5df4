"""servers.coordinator's command line: where participants and the gateway are; bad input exits 2, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.mcp.links import Target
from servers.coordinator import _parser, main, read_setup


def test_a_config_file_and_flags_name_the_participants_and_the_gateway(tmp_path: Path) -> None:
    config = tmp_path / "suite.json"
    config.write_text(
        json.dumps(
            {
                "participants": {"mcp://hotel.example/hatp": "stdio:servers.hotel:/d/hotel"},
                "gateway": {"url": "http://127.0.0.1:9000/mcp"},
                "gatewayKeys": "/org/human-card.json",
                "gatewayId": "https://acme.com/hatp/gateway",
            }
        )
    )
    args = _parser().parse_args(
        ["--participants", str(config), "--participant", "mcp://airline.example/hatp=http://127.0.0.1:9001/mcp"]
    )
    setup = read_setup(args)
    assert setup.participants == {
        "mcp://hotel.example/hatp": Target(module="servers.hotel", data="/d/hotel"),
        "mcp://airline.example/hatp": Target(url="http://127.0.0.1:9001/mcp"),
    }
    assert setup.gateway == Target(url="http://127.0.0.1:9000/mcp")
    assert (setup.gateway_keys, setup.gateway_id) == (Path("/org/human-card.json"), "https://acme.com/hatp/gateway")


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


def test_a_participant_that_cannot_be_reached_at_start_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--participant", "mcp://hotel.example/hatp=http://127.0.0.1:9/mcp", "--data", str(tmp_path)]
    assert main(argv) == 2
    assert "HATP-MCP-6" in capsys.readouterr().err

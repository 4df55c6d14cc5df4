"""`hatp mcp-config`: the Claude Desktop mcpServers JSON, every path absolute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.cli.mcp_config_cmd import SERVERS
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE, load_trust_list


def test_mcp_config_prints_one_stdio_entry_per_server_with_absolute_paths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["mcp-config", "--data", str(tmp_path)]) == 0
    servers = json.loads(capsys.readouterr().out)["mcpServers"]
    assert {"hatp-airline", "hatp-hotel", "hatp-calendar", "hatp-payments"} <= set(servers)
    assert all((Path(s["cwd"]) / "servers" / f"{name[5:]}.py").exists() for name, s in servers.items())
    airline = servers["hatp-airline"]
    assert Path(airline["command"]).is_absolute() and Path(airline["cwd"]).is_absolute()
    assert airline["args"] == ["-m", "servers.airline", "--transport", "stdio", "--data", str(tmp_path / "airline")]
    assert (Path(airline["cwd"]) / "servers" / "airline.py").exists()


def test_mcp_config_only_limits_the_servers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["mcp-config", "--data", str(tmp_path), "--only", "hotel", "--only", "airline"]) == 0
    assert set(json.loads(capsys.readouterr().out)["mcpServers"]) == {"hatp-hotel", "hatp-airline"}


def test_mcp_config_refuses_an_unknown_server_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp-config", "--only", "bank"]) == 2


def test_mcp_config_lists_all_seven_servers_and_the_coordinator_reaches_the_others_by_absolute_paths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["mcp-config", "--data", str(tmp_path)]) == 0
    servers = json.loads(capsys.readouterr().out)["mcpServers"]
    assert set(servers) == {f"hatp-{n}" for n in SERVERS}
    args = servers["hatp-coordinator"]["args"]
    assert f"--participant=mcp://hotel.example/hatp=stdio:servers.hotel:{tmp_path / 'hotel'}" in args
    assert args[args.index("--gateway") + 1] == f"stdio:servers.gateway:{tmp_path / 'gateway'}"
    assert Path(args[args.index("--gateway-keys") + 1]).is_file()
    assert (
        f"--participant-keys=mcp://hotel.example/hatp={tmp_path / 'hotel' / 'public.jwk.json'}" in args
    )  # HATP-MCP-27
    assert "--trust-advertised-keys" not in args


def test_HATP_TXN_21_the_coordinator_claude_desktop_starts_holds_an_agent_key_on_a_signed_agent_card(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from hatp_mcp.core.evidence.keys import SigningKey
    from hatp_mcp.core.humans.agents import card_of_key
    from tests.acme_org import agent_keys, h

    assert main(["mcp-config", "--data", str(tmp_path)]) == 0
    args = json.loads(capsys.readouterr().out)["mcpServers"]["hatp-coordinator"]["args"]
    key = SigningKey.from_jwk(json.loads(Path(args[args.index("--agent-key") + 1]).read_text()))
    card = card_of_key(agent_keys(), key)
    assert "--org" in args and card is not None and card.acts_for == h("dana")


def test_HATP_TRUST_10_mcp_config_makes_the_coordinators_key_and_every_receiver_trusts_only_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["mcp-config", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr()
    servers = json.loads(out.out)["mcpServers"]
    args = servers["hatp-coordinator"]["args"]
    coordinator = args[args.index("--id") + 1]
    public = json.loads((tmp_path / "coordinator" / "public.jwk.json").read_text())
    for name in ("airline", "hotel", "calendar", "payments", "gateway"):
        ring = load_trust_list(tmp_path / name / TRUST_FILE)
        [entry] = ring.entries()
        assert (entry.kid, entry.party, entry.roles) == (public["kid"], coordinator, ("coordinator",))
        assert str(tmp_path / name / TRUST_FILE) in out.err
    assert not (tmp_path / "directory" / TRUST_FILE).exists()  # the Directory changes nothing for a coordinator
    key_before = (tmp_path / "coordinator" / "key.jwk.json").read_text()
    assert main(["mcp-config", "--data", str(tmp_path)]) == 0  # again: the same key, kept
    assert (tmp_path / "coordinator" / "key.jwk.json").read_text() == key_before

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
    from hatp_mcp.core.gateway.agents import card_of_key
    from hatp_mcp.core.signing.keys import SigningKey
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


def org_with_agent(root: Path, *, inbox: bool = False) -> Path:
    from hatp_mcp.cli.org_layout import init_org

    init_org(root, "example.org", inbox=inbox)
    assert main(["card", "person", "--org", str(root), "ann", "--display", "Ann Lee"]) == 0
    assert main(["card", "agent", "--org", str(root), "claude", "--acts-for", "ann"]) == 0
    return root


def test_HATP_MCP_35_the_org_block_has_one_gateway_the_coordinator_reaches_over_loopback_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from hatp_mcp.cli.org_layout import load_suite

    root = org_with_agent(tmp_path / "org", inbox=True)
    capsys.readouterr()
    before = {str(p): p.stat().st_mtime_ns for p in root.rglob("*")}
    assert main(["mcp-config", "--org", str(root), "--direct"]) == 0
    out = capsys.readouterr()
    servers = json.loads(out.out)["mcpServers"]
    suite = load_suite(root)
    assert set(servers) == {"hatp-gateway", "hatp-coordinator", "hatp-directory"}
    assert [n for n, s in servers.items() if "servers.gateway" in " ".join(s["args"])] == ["hatp-gateway"]
    gateway, coordinator = servers["hatp-gateway"]["args"], servers["hatp-coordinator"]["args"]
    assert gateway[gateway.index("--mcp-port") + 1] == str(suite.gateway_mcp_port)
    assert gateway[gateway.index("--inbox-port") + 1] == str(suite.inbox_port)
    assert "--no-signing-tools" in gateway  # HATP-MCP-57: the chat app is offered no tool it cannot sign for
    assert coordinator[coordinator.index("--gateway") + 1] == f"http://127.0.0.1:{suite.gateway_mcp_port}/mcp"
    for p in suite.participants:  # pinned to the operator's copy, never to the file the server writes
        assert f"--participant-keys={p.uri}={p.keys}" in coordinator and f"{p.data}/public.jwk.json" not in coordinator
    assert all(set(s) == {"command", "args"} for s in servers.values())  # no cwd, no PYTHONPATH into a checkout
    text = out.out
    assert "test-only" not in text and "acme.com" not in text and "spec/fixtures" not in text
    assert {str(p): p.stat().st_mtime_ns for p in root.rglob("*")} == before and out.err == ""


def test_HATP_MCP_35_the_acme_test_organisation_is_refused_as_an_org_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import shutil

    from tests.acme_org import ORG_DIR

    root = org_with_agent(tmp_path / "org")
    shutil.copy(ORG_DIR / ".well-known" / "human-card.json", root / ".well-known" / "human-card.json")  # planted
    capsys.readouterr()
    assert main(["mcp-config", "--org", str(root)]) == 1
    out = capsys.readouterr()
    assert out.out == "" and "HATP-MCP-35" in out.err and "TEST-ONLY key" in out.err
    assert main(["mcp-config", "--org", str(ORG_DIR)]) == 1  # no suite.json: not made by hatp init-org
    assert "not an organisation made by hatp init-org" in capsys.readouterr().err


def test_HATP_MCP_35_an_org_without_an_agent_card_is_refused_saying_how_to_add_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from hatp_mcp.cli.org_layout import init_org

    root = init_org(tmp_path / "org", "example.org")
    assert main(["mcp-config", "--org", str(root)]) == 1
    assert "hatp card agent --org DIR NAME --acts-for PERSON" in capsys.readouterr().err


def test_the_journal_joins_the_org_block_when_the_organisation_has_its_allow_list(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = org_with_agent(tmp_path / "org")
    (root / "journal-allow.json").write_text(json.dumps({"servers": {"shop": "http://127.0.0.1:9010/mcp"}}))
    capsys.readouterr()
    assert main(["mcp-config", "--org", str(root), "--direct"]) == 0
    journal = json.loads(capsys.readouterr().out)["mcpServers"]["hatp-journal"]["args"]
    assert journal[:2] == ["-m", "servers.journal"] and journal[journal.index("--allow") + 1] == str(
        root / "journal-allow.json"
    )


def test_the_test_suites_block_says_it_is_the_test_only_acme_organisation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["mcp-config", "--data", str(tmp_path)]) == 0
    assert "TEST-ONLY organisation acme.com" in capsys.readouterr().err


def test_the_org_blocks_gateway_serves_no_inbox_unless_the_organisation_turned_it_on(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = org_with_agent(tmp_path / "org")
    capsys.readouterr()
    assert main(["mcp-config", "--org", str(root), "--direct"]) == 0
    gateway = json.loads(capsys.readouterr().out)["mcpServers"]["hatp-gateway"]["args"]
    assert "--inbox-port" not in gateway and "--mcp-port" in gateway
    assert json.loads((root / "gateway.json").read_text()) == {"delivery": {}, "channels": {}}


def test_HATP_MCP_45_the_org_block_gives_each_server_as_a_bridge_command_and_as_a_loopback_url(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from hatp_mcp.cli.org_layout import load_suite

    root = org_with_agent(tmp_path / "org", inbox=True)
    capsys.readouterr()
    assert main(["mcp-config", "--org", str(root)]) == 0
    block = json.loads(capsys.readouterr().out)
    suite = load_suite(root)
    names = {"hatp-gateway", "hatp-coordinator", "hatp-directory"}
    assert set(block["mcpServers"]) == names == set(block["httpServers"])
    for name, entry in block["mcpServers"].items():
        assert entry["args"] == ["-m", "hatp_mcp.cli", "connect", name.removeprefix("hatp-"), "--org", str(root)]
    assert block["httpServers"]["hatp-gateway"] == {
        "type": "http",
        "url": f"http://127.0.0.1:{suite.gateway_mcp_port}/mcp",
        "tokenFile": block["httpServers"]["hatp-coordinator"]["tokenFile"],  # HATP-GW-89: the same client token
    }
    assert block["httpServers"]["hatp-coordinator"]["url"] == f"http://127.0.0.1:{suite.coordinator_mcp_port}/mcp"
    assert all(u["url"].startswith("http://127.0.0.1:") for u in block["httpServers"].values())

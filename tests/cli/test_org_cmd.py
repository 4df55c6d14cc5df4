"""`hatp org wrap DIR NAME POLICY`: a third-party MCP server added to an organisation behind the proxy
(HATP-MCP-58), then run by `hatp serve` and printed by `hatp mcp-config --org` in both forms (HATP-MCP-59)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.cli import main
from hatp_mcp.cli.mcp_config_cmd import org_parts
from hatp_mcp.cli.org_layout import OrgLayout, load_suite
from hatp_mcp.cli.serve_cmd import child_specs
from tests.cli.test_mcp_config_cmd import org_with_agent

POLICY: dict[str, Any] = {
    "upstream": {"command": "node", "args": ["server-memory/dist/index.js"], "env": {"MEMORY_FILE_PATH": "m.jsonl"}},
    "default": "deny",
    "tools": {"read_graph": {"policy": "pass"}},
}


def policy_file(tmp: Path, doc: dict[str, Any] | None = None) -> Path:
    path = tmp / "memory-policy.json"
    path.write_text(json.dumps(doc if doc is not None else POLICY))
    return path


def test_HATP_MCP_58_wrap_records_the_server_in_suite_json_with_its_policy_data_and_port(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = org_with_agent(tmp_path / "org")
    policy = policy_file(tmp_path)
    assert main(["org", "wrap", str(root), "memory", str(policy), "--port", "18765"]) == 0
    (wrapped,) = load_suite(root).wrapped
    assert (wrapped.name, wrapped.policy, wrapped.port) == ("memory", policy, 18765)
    assert wrapped.data == OrgLayout(root).data("memory")
    assert "hatp mcp-config --org" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["coordinator", "journal", "airline", "Memory", "a b"])
def test_HATP_MCP_58_a_name_the_service_uses_or_no_server_name_is_refused_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    root = org_with_agent(tmp_path / "org")
    before = (root / "suite.json").read_bytes()
    assert main(["org", "wrap", str(root), name, str(policy_file(tmp_path))]) == 1
    assert "HATP-MCP-58" in capsys.readouterr().err
    assert (root / "suite.json").read_bytes() == before


def test_HATP_MCP_58_a_second_server_of_the_same_name_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = org_with_agent(tmp_path / "org")
    assert main(["org", "wrap", str(root), "memory", str(policy_file(tmp_path))]) == 0
    before = (root / "suite.json").read_bytes()
    assert main(["org", "wrap", str(root), "memory", str(policy_file(tmp_path))]) == 1
    assert "HATP-MCP-58" in capsys.readouterr().err and (root / "suite.json").read_bytes() == before


def test_HATP_MCP_58_a_policy_the_proxy_would_refuse_is_refused_with_its_rule_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = org_with_agent(tmp_path / "org")
    before = (root / "suite.json").read_bytes()
    journal_without_undo = POLICY | {"tools": {"create_entities": {"policy": "journal"}}}
    assert main(["org", "wrap", str(root), "memory", str(policy_file(tmp_path, journal_without_undo))]) == 1
    err = capsys.readouterr().err
    assert "HATP-PXY-1" in err and "tools.create_entities.undo" in err
    assert (root / "suite.json").read_bytes() == before


def test_HATP_MCP_59_mcp_config_prints_a_wrapped_server_as_a_bridge_and_a_url_with_the_clients_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = org_with_agent(tmp_path / "org")
    policy = policy_file(tmp_path)
    assert main(["org", "wrap", str(root), "memory", str(policy), "--port", "18766"]) == 0
    capsys.readouterr()
    assert main(["mcp-config", "--org", str(root)]) == 0
    block = json.loads(capsys.readouterr().out)
    assert block["mcpServers"]["hatp-memory"]["args"][-4:] == ["connect", "memory", "--org", str(root)]
    url = block["httpServers"]["hatp-memory"]
    assert url["url"] == "http://127.0.0.1:18766/mcp"
    assert url["tokenFile"] == str(root / "private" / "clients" / "claude.token")
    assert main(["mcp-config", "--org", str(root), "--direct"]) == 0
    direct = json.loads(capsys.readouterr().out)["mcpServers"]["hatp-memory"]
    assert direct["args"][:2] == ["-m", "servers.journal_proxy"]
    assert direct["args"][-4:] == ["--data", str(OrgLayout(root).data("memory")), "--policy", str(policy)]


def test_HATP_MCP_59_the_service_runs_the_wrapped_servers_proxy_last_serving_only_the_organisations_client(
    tmp_path: Path,
) -> None:
    root = org_with_agent(tmp_path / "org")
    policy = policy_file(tmp_path)
    assert main(["org", "wrap", str(root), "memory", str(policy), "--port", "18767"]) == 0
    callers = tmp_path / "callers.json"
    specs = child_specs(org_parts(root), sys.executable, callers=callers)
    assert specs[-1].name == "memory" and specs[-1].port == 18767
    argv = specs[-1].command({"gateway": 18000}, 18767)
    assert argv[1:3] == ["-m", "servers.journal_proxy"] and "--parent-watch" in argv
    assert argv[argv.index("--policy") + 1] == str(policy) and argv[argv.index("--callers") + 1] == str(callers)
    assert "--gateway" not in argv  # nothing gated: no gateway, no agent key


def test_HATP_MCP_59_a_wrapped_server_with_a_gated_tool_is_given_the_organisation_its_gateway_and_agent(
    tmp_path: Path,
) -> None:
    root = org_with_agent(tmp_path / "org")
    gate = {"address": "human://example.org/ann", "action": "memory.write"}
    gated = POLICY | {"tools": {"create_entities": {"policy": "gate", "gate": gate}}}
    assert main(["org", "wrap", str(root), "memory", str(policy_file(tmp_path, gated))]) == 0
    argv = child_specs(org_parts(root), sys.executable)[-1].command({"gateway": 18000}, 0)
    assert argv[argv.index("--gateway") + 1] == "http://127.0.0.1:18000/mcp"
    assert argv[argv.index("--org") + 1] == str(root)
    assert argv[argv.index("--agent-key") + 1].endswith("claude.private.jwk.json")


def test_HATP_MCP_58_the_bridge_reaches_a_wrapped_server_by_its_name_and_refuses_any_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = org_with_agent(tmp_path / "org")
    assert main(["org", "wrap", str(root), "memory", str(policy_file(tmp_path))]) == 0
    assert main(["connect", "memroy", "--org", str(root)]) == 2
    err = capsys.readouterr().err
    assert "'memroy' is no server of the service" in err and "journal, memory" in err

"""servers.gateway's `--mcp-port`: the port is bound before anything starts, so a second gateway for an
organisation whose gateway already holds it refuses to start (HATP-MCP-35)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from hatp_mcp.cli.org_layout import OrgLayout, init_org


def test_HATP_MCP_35_a_second_gateway_on_the_organisations_mcp_port_refuses_to_start(tmp_path: Path) -> None:
    layout = OrgLayout(init_org(tmp_path / "org", "example.org"))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as first:  # the running gateway holds its port
        first.bind(("127.0.0.1", 0))
        first.listen()
        port = first.getsockname()[1]
        args = ["--org", str(layout.root), "--key", str(layout.gateway_key), "--mcp-port", str(port)]
        done = subprocess.run(
            [sys.executable, "-m", "servers.gateway", "--data", str(layout.data("gateway")), *args],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 2
    assert f"gateway: cannot start: --mcp-port {port}" in done.stderr and "HATP-MCP-35" in done.stderr
    assert "another gateway of this organisation" in done.stderr

"""`hatp conformance gateway` against real processes: the project's Human Gateway over stdio conforms, and the
same gateway with its coordinator check switched off (tests/conformance/broken_gateway.py) is reported failing
exactly the HATP-TRUST rules it breaks."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.mcp.launch import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
ADDRESS = "human://acme.com/role/finance-approver?quorum=1-of-3"  # spec/fixtures/org, the gateway's default org


async def conformance(module: str, data: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    server = shlex.join(
        [sys.executable, "-m", module, "--data", str(data), "--trusted-coordinators", "{trust}", *extra]
        + (["--transport", "stdio"] if module == "servers.gateway" else [])
    )
    argv = [sys.executable, "-m", "hatp_mcp.cli", "conformance", "gateway", "--command", server]
    argv += ["--address", ADDRESS, "--action", "travel.spend", "--json", "--timeout", "15"]
    with anyio.fail_after(120):
        done = await anyio.run_process(argv, cwd=ROOT, check=False)
    assert done.stdout, done.stderr.decode()
    return done.returncode, json.loads(done.stdout)


async def test_HATP_CONF_5_the_project_gateway_over_stdio_passes_every_check(tmp_path: Path) -> None:
    code, report = await conformance("servers.gateway", tmp_path / "gw")
    assert (code, report["ok"], report["failedRules"], report["counts"]["skipped"]) == (0, True, [], 0)
    rules = {c["rule"] for c in report["checks"]}
    assert {"HATP-MCP-1", "HATP-MCP-9", "HATP-MCP-10", "HATP-OBJ-3", "HATP-TRUST-8", "HATP-WIRE-1"} <= rules
    asked = next(c for c in report["checks"] if c["check"].startswith("a proven ask"))
    assert "decision=pending" in asked["got"]  # routed to the finance approvers, then withdrawn by the runner


async def test_HATP_CONF_4_a_gateway_that_admits_unproven_requests_is_named_by_the_trust_rules(tmp_path: Path) -> None:
    code, report = await conformance("tests.conformance.broken_gateway", tmp_path / "gw")
    assert code == 1 and report["ok"] is False
    assert report["failedRules"] == ["HATP-TRUST-1", "HATP-TRUST-2", "HATP-TRUST-3", "HATP-TRUST-4", "HATP-TRUST-8"]


@pytest.mark.parametrize(
    ("mode", "broken"), [("estimate-unsigned", ["HATP-MCP-17"]), ("tighten-ignored", ["HATP-MCP-18"])]
)
async def test_HATP_CONF_4_a_gateway_breaking_estimate_or_tighten_is_named_by_that_rule(
    tmp_path: Path, mode: str, broken: list[str]
) -> None:
    code, report = await conformance("tests.conformance.broken_gateway", tmp_path / "gw", "--break", mode)
    assert code == 1 and report["ok"] is False
    assert report["failedRules"] == broken

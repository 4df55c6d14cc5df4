"""`hatp conformance participant` against real server processes: the project's own payments server over stdio and
over streamable HTTP conforms, and a participant built with serve_hatp whose runtime breaks one rule on purpose
(tests/conformance/broken_participant.py) is reported failing exactly that rule's checks, by rule id."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.conformance.target import open_identity
from hatp_mcp.conformance.wire import CASES
from hatp_mcp.mcp.launch import ROOT, launch_http
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
PAYMENTS = "mcp://payments.example/hatp"
ARGS = '{"card": "{txn}", "payee": "shop"}'  # every transaction authorizes a card of its own


async def conformance(*target: str, keys: Path | None = None) -> tuple[int, dict[str, Any]]:
    """Run the CLI as a process, as a user would; its exit code and JSON report."""
    argv = [sys.executable, "-m", "hatp_mcp.cli", "conformance", "participant", *target]
    argv += ["--participant", PAYMENTS, "--args", ARGS, "--json", "--timeout", "15"]
    if keys is not None:
        argv += ["--keys", str(keys)]
    with anyio.fail_after(120):
        done = await anyio.run_process(argv, cwd=ROOT, check=False)
    assert done.stdout, done.stderr.decode()
    return done.returncode, json.loads(done.stdout)


def command(module: str, data: Path, *extra: str) -> str:
    return shlex.join([sys.executable, "-m", module, "--data", str(data), "--trusted-coordinators", "{trust}", *extra])


async def test_HATP_CONF_3_the_payments_server_over_stdio_passes_every_check(tmp_path: Path) -> None:
    code, report = await conformance("--command", command("servers.payments", tmp_path / "pay", "--transport", "stdio"))
    assert report["failedRules"] == [] and report["counts"]["skipped"] == 0
    assert code == 0 and report["ok"] is True
    rules = {c["rule"] for c in report["checks"]}
    assert {"HATP-MCP-1", "HATP-OBJ-3", "HATP-PART-1", "HATP-PART-6", "HATP-PART-10", "HATP-WIRE-1"} <= rules
    assert {f"HATP-TRUST-{n}" for n in (1, 2, 3, 4, 5, 7, 8)} <= rules
    assert all(c["verdict"] == "pass" and c["sent"] and c["expected"] and c["got"] for c in report["checks"])


async def test_HATP_CONF_2_the_payments_server_over_http_trusting_the_runners_keys_passes(tmp_path: Path) -> None:
    identity = open_identity(tmp_path / "runner")  # what `hatp conformance participant --keys DIR` writes
    data = tmp_path / "pay"
    data.mkdir()
    (data / TRUST_FILE).write_text(identity.trust_file.read_text())
    async with launch_http("servers.payments", data) as proc:
        code, report = await conformance("--url", proc.url, keys=tmp_path / "runner")
    assert (code, report["ok"], report["failedRules"]) == (0, True, [])
    wire = [c for c in report["checks"] if c["rule"].startswith("HATP-WIRE")]
    assert len(wire) == len(CASES) == 7 and all("HTTP 400" in c["got"] for c in wire)
    assert {c["got"].split(", id ")[-1] for c in wire} == {str(9001 + i) for i in range(7)}  # each answer is its own


async def test_HATP_CONF_2_a_server_that_does_not_trust_the_runner_fails_the_run(tmp_path: Path) -> None:
    untrusting = shlex.join([sys.executable, "-m", "servers.payments", "--data", str(tmp_path), "--transport", "stdio"])
    code, report = await conformance("--command", untrusting)
    assert code == 1 and report["ok"] is False
    prepared = next(c for c in report["checks"] if c["rule"] == "HATP-PART-1")
    assert prepared["verdict"] == "fail" and "NO_TRUSTED_COORDINATOR" in prepared["got"]  # HATP-TRUST-6


@pytest.mark.parametrize(
    ("mode", "broken"),
    [
        # the planted violations: each breaks these rules and no other
        (  # HATP-REC-23 too: the commit sent without auth was admitted, so the branch is no longer prepared
            "trust-anyone",
            [
                "HATP-TRUST-1",
                "HATP-TRUST-2",
                "HATP-TRUST-3",
                "HATP-TRUST-4",
                "HATP-TRUST-5",
                "HATP-TRUST-7",
                "HATP-REC-23",
            ],
        ),
        ("unsigned-yes", ["HATP-PART-1"]),
        ("other-digest", ["HATP-PART-1", "HATP-PART-6"]),
        ("commit-again", ["HATP-PART-10"]),
        ("quote-forever", ["HATP-MODE-3"]),
        ("renew-past-horizon", ["HATP-PART-4"]),
        ("compensate-hold", ["HATP-PART-7"]),
        ("no-head", ["HATP-REC-19", "HATP-REC-23"]),
    ],
)
async def test_HATP_CONF_4_a_broken_participant_is_reported_by_the_rules_it_breaks(
    tmp_path: Path, mode: str, broken: list[str]
) -> None:
    target = command("tests.conformance.broken_participant", tmp_path / "pay", "--break", mode)
    code, report = await conformance("--command", target)
    assert code == 1 and report["ok"] is False
    assert report["failedRules"] == broken
    failed = [c for c in report["checks"] if c["verdict"] == "fail"]
    assert all(c["got"] != c["expected"] for c in failed)


async def test_HATP_CONF_1_checks_that_could_not_run_are_skipped_and_fail_the_run(tmp_path: Path) -> None:
    target = command("tests.conformance.broken_participant", tmp_path / "pay", "--break", "unsigned-yes")
    code, report = await conformance("--command", target)
    skipped = [c for c in report["checks"] if c["verdict"] == "skipped"]
    assert skipped and skipped[0]["got"] == "no yes vote to commit on"
    assert code == 1 and report["counts"]["skipped"] == len(skipped)

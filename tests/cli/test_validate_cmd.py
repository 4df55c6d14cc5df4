"""`hatp validate`: exit codes, --json output, text blocks, --now, and one-line errors for unreadable input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.cli import main
from hatp_mcp.cli.validate_cmd import parse_now

FIXTURES = Path(__file__).resolve().parents[2] / "spec" / "fixtures"


def fixture_files(kind: str) -> list[Path]:
    return sorted(p for p in (FIXTURES / kind).glob("*.json") if ".expected" not in p.name)


def expected(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(path.with_name(path.stem + ".expected.json").read_text())
    return out


def run_json(path: Path | str, now: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["validate", str(path), "--json", "--now", now])
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, out


@pytest.mark.parametrize(
    "path", fixture_files("saga") + fixture_files("hatp"), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_every_fixture_passes_through_the_cli_with_its_exit_code_and_json(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = expected(path)
    code, out = run_json(path, exp["now"], capsys)
    assert code == (0 if exp["ok"] else 1)
    assert set(out) == {"ok", "kind", "violations"}
    assert (out["ok"], out["kind"]) == (exp["ok"], exp["kind"])
    assert [{"rule": v["rule"], "path": v["path"]} for v in out["violations"]] == exp["violations"]
    assert all(set(v) == {"rule", "path", "message"} and v["message"] for v in out["violations"])


def test_text_output_is_one_block_per_violation_with_rule_path_and_message(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "saga" / "unbounded-wait-inside-undo-window.json"
    assert main(["validate", str(path), "--now", "2026-12-01T09:00:00Z"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('✗ undo-ttl  steps[2].maxDurationSeconds  Step "s2" (compliance.review) declares no')
    assert lines[0].endswith("or move the human step past the pivot.")
    assert lines[-1].endswith("1 violation (saga)")


def test_a_valid_hatp_plan_prints_the_modes_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(FIXTURES / "hatp" / "trip.valid.json"), "--now", "2026-12-01T09:00:00Z"]) == 0
    assert "modes that fit: parallel, holds-first, approval-first" in capsys.readouterr().out


def test_now_decides_what_has_expired(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "saga" / "supplier-onboarding.valid.json"
    code, out = run_json(path, "2027-08-07T19:00:00+01:00", capsys)  # 18:00Z, the mandate's expiry
    assert code == 1 and [v["rule"] for v in out["violations"]] == ["mandate"]


def test_now_defaults_to_the_real_clock() -> None:
    assert parse_now(None).tzinfo is not None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "HATP-OBJ-1"),
        (b'{"hello": 1}', "neither a HATP plan"),
        (b"[1, 2]", "neither a HATP plan"),
    ],
)
def test_unreadable_input_exits_2_with_one_line(
    tmp_path: Path, content: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "plan.json"
    p.write_bytes(content)
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_missing_file_and_a_bad_now_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "absent.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    trip = str(FIXTURES / "hatp" / "trip.valid.json")
    assert main(["validate", trip, "--now", "tomorrow"]) == 2
    assert main(["validate", trip, "--now", "2026-12-01T09:00:00"]) == 2
    assert "no time zone" in capsys.readouterr().err


def test_the_installed_command_runs_as_a_real_process() -> None:
    path = FIXTURES / "saga" / "key-mismatch-replay.json"
    proc = subprocess.run(
        [sys.executable, "-m", "hatp_mcp.cli", "validate", str(path), "--json", "--now", "2026-12-01T09:00:00Z"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["kind"] == "saga" and [v["rule"] for v in out["violations"]] == ["key-integrity"]


@pytest.mark.parametrize("now", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_now_that_leaves_the_calendar_once_in_utc_exits_2_with_one_line(
    now: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", str(fixture_files("hatp")[0]), "--now", now])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "outside years 1..9999 once moved to UTC" in err


def test_HATP_OBJ_4_validate_refuses_a_plan_file_whose_args_overflow_a_double(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.factories import trip_plan_json

    text = json.dumps(trip_plan_json()).replace('"seat": "14C"', '"seat": 1e400')
    assert "1e400" in text
    path = tmp_path / "plan.json"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "HATP-OBJ-4" in err and "1e400 overflows a double" in err and err.count("\n") == 1
    assert main(["digest", str(path)]) == 2  # every loader: no digest of a plan that means two things
    assert "HATP-OBJ-4" in capsys.readouterr().err

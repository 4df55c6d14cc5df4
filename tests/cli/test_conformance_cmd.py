"""`hatp conformance` usage: wrong calls exit 2 with one line; `--keys DIR` alone writes the runner's identity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.conformance.target import RUNNER_ID, TRUST_PLACEHOLDER, Target


def test_HATP_CONF_2_keys_alone_writes_the_runners_key_and_a_trust_list_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "participant", "--keys", str(tmp_path / "runner")]) == 0
    trust = Path(capsys.readouterr().out.strip())
    keys = json.loads(trust.read_text())["keys"]
    assert [(k["party"], k["roles"]) for k in keys] == [(RUNNER_ID, ["coordinator"])]
    assert (tmp_path / "runner" / "key.jwk.json").stat().st_mode & 0o777 == 0o600
    again = main(["conformance", "participant", "--keys", str(tmp_path / "runner")])
    assert again == 0 and json.loads(trust.read_text())["keys"] == keys  # the same key on the next run


def test_HATP_CONF_2_the_trust_placeholder_is_filled_and_the_command_split_never_run_by_a_shell() -> None:
    target = Target.from_command(f"server --trusted-coordinators {TRUST_PLACEHOLDER} 'a b;rm -rf x'", Path("/t.json"))
    assert target.command == ("server", "--trusted-coordinators", "/t.json", "a b;rm -rf x")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--command", "x", "--participant", "mcp://p", "--args", "[]"], "--args: must be a JSON object"),
        (["--command", "x", "--participant", "mcp://p", "--args", "{"], "--args: not JSON"),
        (["--command", "x"], "--participant URI is required"),
        ([], "give --command or --url"),
        (["--command", "", "--participant", "mcp://p"], "--command: it is empty"),
    ],
)
def test_a_wrong_call_exits_2_with_one_line(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "participant", *argv]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_a_command_that_cannot_start_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "no-such-server")
    code = main(["conformance", "participant", "--command", missing, "--participant", "mcp://p", "--timeout", "5"])
    assert code == 2
    assert f"cannot reach {missing}" in capsys.readouterr().err

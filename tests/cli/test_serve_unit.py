"""`hatp serve --install`: the service as a systemd user unit, written where XDG_CONFIG_HOME says, never running
systemctl unless told, never overwriting another unit (HATP-MCP-61)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hatp_mcp.cli import main as hatp
from hatp_mcp.cli.serve_unit import unit_text

RUN = subprocess.run  # systemd-analyze runs for real; systemctl must never run


def make_org(tmp_path: Path, name: str = "example org") -> Path:
    root = tmp_path / name
    steps = [
        ["init-org", str(root), "--name", "example.org"],
        ["card", "person", "--org", str(root), "ann", "--display", "Ann Lee", "--role", "travel-requester"],
        ["card", "agent", "--org", str(root), "claude", "--acts-for", "ann"],
    ]
    for step in steps:
        assert hatp(step) == 0, step
    return root


def test_HATP_MCP_61_install_writes_a_user_unit_under_xdg_config_home_that_serves_the_org_and_restarts_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_org(tmp_path)
    config = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    ran: list[object] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))  # never called without --enable
    capsys.readouterr()
    assert hatp(["serve", "--org", str(root), "--install"]) == 0
    said = capsys.readouterr()
    unit = config / "systemd" / "user" / "hatp-example-org.service"
    text = unit.read_text()
    python = str(Path(sys.executable).absolute())
    assert f'ExecStart="{python}" "-m" "hatp_mcp.cli" "serve" "--org" "{root.absolute()}"' in text
    assert "Restart=on-failure" in text.splitlines() and "WantedBy=default.target" in text.splitlines()
    assert ran == [] and "systemctl --user enable --now hatp-example-org.service" in said.out
    assert str(unit) in said.err
    assert hatp(["serve", "--org", str(root), "--install"]) == 0  # the same unit again: nothing changes
    assert unit.read_text() == text
    verify = shutil.which("systemd-analyze")
    if verify is not None:  # systemd's own reading of it, where systemd is installed
        done = RUN([verify, "verify", str(unit)], capture_output=True, text=True, check=False)
        assert done.returncode == 0 and unit.name not in done.stderr, done.stderr


def test_HATP_MCP_61_a_different_unit_of_that_name_is_left_as_it_was_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_org(tmp_path, "acme")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / "hatp-acme.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/usr/bin/true\n")
    capsys.readouterr()
    assert hatp(["serve", "--org", str(root), "--install"]) == 2
    said = capsys.readouterr().err
    assert unit.read_text() == "[Service]\nExecStart=/usr/bin/true\n"
    assert "HATP-MCP-61" in said and str(unit) in said


def test_a_path_with_quotes_percent_and_dollar_is_escaped_as_systemd_reads_it() -> None:
    text = unit_text("/opt/py", Path('/srv/a "b" 100% $x'))
    assert 'ExecStart="/opt/py" "-m" "hatp_mcp.cli" "serve" "--org" "/srv/a \\"b\\" 100%% $$x"' in text

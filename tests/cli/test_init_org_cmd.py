"""`hatp init-org`: exit 0 and the next steps; exit 1 naming HATP-MCP-36 over an existing organisation."""

from __future__ import annotations

from pathlib import Path

import pytest

from hatp_mcp.cli import main


def test_init_org_makes_the_organisation_and_says_what_to_do_next(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["init-org", str(tmp_path / "org"), "--name", "example.org", "--inbox-port", "18400"]) == 0
    out = capsys.readouterr().out
    assert "organisation example.org in" in out and "http://localhost:18400/" in out
    assert "hatp card person" in out and f"hatp mcp-config --org {tmp_path / 'org'}" in out


def test_HATP_MCP_36_init_org_over_an_existing_directory_exits_1_naming_the_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "org").mkdir()
    (tmp_path / "org" / "notes.txt").write_text("mine")
    assert main(["init-org", str(tmp_path / "org"), "--name", "example.org"]) == 1
    err = capsys.readouterr().err
    assert "HATP-MCP-36" in err and "never overwritten" in err
    assert [p.name for p in (tmp_path / "org").iterdir()] == ["notes.txt"]


def test_init_org_refuses_a_name_that_is_no_dns_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["init-org", str(tmp_path / "org"), "--name", "acme"]) == 2
    assert "DNS name" in capsys.readouterr().err and not (tmp_path / "org").exists()

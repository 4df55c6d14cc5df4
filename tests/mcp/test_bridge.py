"""The stdio bridge's token file (HATP-MCP-46): the owner's alone, one token, never in a message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hatp_mcp.mcp.bridge import TokenFileError, read_token

SECRET = "hatp-token-3f9c2a7d"


def token_file(tmp_path: Path, text: str, mode: int) -> Path:
    path = tmp_path / "coordinator.token"
    path.write_text(text)
    os.chmod(path, mode)
    return path


def test_HATP_MCP_46_the_bridge_reads_the_token_from_a_file_only_its_owner_can_read(tmp_path: Path) -> None:
    assert read_token(token_file(tmp_path, SECRET + "\n", 0o600)) == SECRET
    assert read_token(token_file(tmp_path, SECRET, 0o400)) == SECRET


@pytest.mark.parametrize(
    ("text", "mode", "said"),
    [(SECRET, 0o644, "chmod 600"), (SECRET, 0o640, "chmod 600"), ("", 0o600, "one token"), ("a b", 0o600, "one token")],
)
def test_HATP_MCP_46_a_token_file_others_can_read_or_that_holds_no_single_token_is_refused_without_the_token(
    tmp_path: Path, text: str, mode: int, said: str
) -> None:
    with pytest.raises(TokenFileError) as refused:
        read_token(token_file(tmp_path, text, mode))
    assert said in str(refused.value) and "HATP-MCP-46" in str(refused.value)
    assert SECRET not in str(refused.value)


def test_HATP_MCP_46_a_missing_token_file_is_named() -> None:
    with pytest.raises(TokenFileError, match="cannot read the token file"):
        read_token(Path("/nonexistent/coordinator.token"))

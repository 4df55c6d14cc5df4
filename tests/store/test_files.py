"""Key and pin files are never seen half written: created only when absent (the first writer wins), replaced in
one step, and a failure while writing leaves nothing at the target."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hatp_mcp.store import files
from hatp_mcp.store.files import create_file, replace_file


def test_create_file_creates_once_and_the_first_writer_wins(tmp_path: Path) -> None:
    target = tmp_path / "keys" / "key.jwk.json"
    assert create_file(target, '{"first": true}') is True
    assert create_file(target, '{"second": true}') is False
    assert target.read_text() == '{"first": true}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["key.jwk.json"]  # no temporary file left behind


def test_replace_file_swaps_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "public.jwk.json"
    replace_file(target, "old")
    replace_file(target, "new")
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["public.jwk.json"]


@pytest.mark.parametrize("write", [create_file, replace_file])
def test_a_failure_while_writing_leaves_no_file_at_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: object
) -> None:
    target = tmp_path / "key.jwk.json"

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write(target, '{"d": "secret"}')  # type: ignore[operator]
    assert not target.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(files.os, "fsync", os.fsync)


def test_HATP_MCP_34_a_servers_key_is_made_once_and_neither_file_is_rewritten_at_the_next_start(
    tmp_path: Path,
) -> None:
    first = files.load_or_create_key(tmp_path, ["participant"])
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    again = files.load_or_create_key(tmp_path, ["participant"])
    assert again.kid == first.kid
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before


def test_HATP_MCP_34_a_public_key_file_replaced_by_another_key_refuses_the_start_and_is_left_as_found(
    tmp_path: Path,
) -> None:
    import json
    import subprocess
    import sys

    from hatp_mcp.core.signing.keys import SigningKey

    files.load_or_create_key(tmp_path, ["participant"])
    planted = json.dumps(SigningKey.generate(["participant"]).public_jwk())  # someone swapped the public half
    (tmp_path / "public.jwk.json").write_text(planted)
    with pytest.raises(ValueError, match=r"HATP-MCP-34: .*public\.jwk\.json is not the public half of"):
        files.load_or_create_key(tmp_path, ["participant"])
    # a real server process refuses to start on it, naming the rule, and leaves the file as it found it
    done = subprocess.run(
        [sys.executable, "-m", "servers.hotel", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2 and "hotel: cannot start: HATP-MCP-34" in done.stderr
    assert (tmp_path / "public.jwk.json").read_text() == planted

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

"""One process at a time on a folder: the lock file (the service on its store, HATP-MCP-42; a proxy on its data)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hatp_mcp.store.data_lock import DataLock, DataLocked, data_lock, held_by

NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)


def test_HATP_MCP_42_a_second_lock_on_one_store_is_refused_naming_the_holder_and_freed_on_release(
    tmp_path: Path,
) -> None:
    first, second = DataLock(tmp_path / "service.lock"), DataLock(tmp_path / "service.lock")
    first.acquire(NOW.isoformat())
    assert held_by(tmp_path / "service.lock") == {"pid": os.getpid(), "since": NOW.isoformat()}
    with pytest.raises(DataLocked) as busy:
        second.acquire(NOW.isoformat())
    assert f"held by pid {os.getpid()} since {NOW.isoformat()}" in str(busy.value)
    first.release()
    assert held_by(tmp_path / "service.lock") is None
    second.acquire(NOW.isoformat())  # a file left behind keeps nobody out once its holder is gone
    second.release()


def test_a_held_data_lock_refuses_a_second_holder_at_once_and_frees_the_folder_when_the_block_ends(
    tmp_path: Path,
) -> None:
    with data_lock(tmp_path, "proxy"):
        with pytest.raises(DataLocked) as held, data_lock(tmp_path, "proxy"):
            pass
        assert held.value.holder == {"pid": os.getpid()}
    assert held_by(tmp_path / "proxy.lock") is None
    assert (tmp_path / "proxy.lock").stat().st_mode & 0o077 == 0

"""One service per organisation store: the lock file."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hatp_mcp.runtime.service.service_lock import ServiceBusy, ServiceLock, held_by

NOW = datetime(2026, 12, 1, 10, tzinfo=UTC)


def test_HATP_MCP_42_a_second_lock_on_one_store_is_refused_naming_the_holder_and_freed_on_release(
    tmp_path: Path,
) -> None:
    first, second = ServiceLock(tmp_path / "service.lock"), ServiceLock(tmp_path / "service.lock")
    first.acquire(NOW)
    assert held_by(tmp_path / "service.lock") == {"pid": os.getpid(), "since": NOW.isoformat()}
    with pytest.raises(ServiceBusy) as busy:
        second.acquire(NOW)
    assert f"held by pid {os.getpid()} since {NOW.isoformat()}" in str(busy.value)
    first.release()
    assert held_by(tmp_path / "service.lock") is None
    second.acquire(NOW)  # a file left behind keeps nobody out once its holder is gone
    second.release()

"""Shared test fixtures: the anyio backend (asyncio) and a fake clock."""

from __future__ import annotations

import pytest

from hatp_mcp.runtime.clock import FakeClock


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()

"""End-to-end fixtures: real server processes, started once per module (a spawn costs ~0.7 s on 2 cores)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"

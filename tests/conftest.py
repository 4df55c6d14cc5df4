"""Shared test fixtures: the anyio backend (asyncio), a fake clock and a throwaway PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hatp_mcp.runtime.clock import FakeClock
from tests.postgres_cluster import MISSING, Cluster, find_bindir, running_cluster


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
def postgres() -> Iterator[Cluster]:
    """One real cluster for the whole run, started by the first test that needs it. Missing binaries fail the test
    that asked (never a skip): `make pytest` installs them."""
    if find_bindir() is None:
        pytest.fail(MISSING, pytrace=False)
    with running_cluster() as cluster:
        yield cluster


@pytest.fixture
def pg_url(postgres: Cluster) -> str:
    """A fresh, empty database on the session's cluster."""
    return postgres.new_database()

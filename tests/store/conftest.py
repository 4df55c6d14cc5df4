"""The one parametrized fixture every store test runs on: each store on SQLite (a file under tmp_path) and on a
real PostgreSQL (a fresh database on the session's throwaway cluster, tests/postgres_cluster.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest

from hatp_mcp.store.url import StoreUrl
from tests.postgres_cluster import Cluster

C = TypeVar("C")


@dataclass
class Backend:
    """`url(name)`: the same store each time for one name (reopening it finds what was written)."""

    name: str
    tmp: Path
    database: str | None = None
    cluster: Cluster | None = None
    opened: list[Any] = field(default_factory=list)

    def closing(self, store: C) -> C:
        """`store`, closed when the test ends."""
        self.opened.append(store)
        return store

    def url(self, component: str) -> StoreUrl:
        if self.database is not None:
            return StoreUrl("postgresql", self.database)
        return StoreUrl.sqlite(self.tmp / f"{component}.db")

    @property
    def integrity_error(self) -> type[Exception]:
        return psycopg.IntegrityError if self.database is not None else sqlite3.IntegrityError


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        made = Backend("sqlite", tmp_path)
    else:
        cluster: Cluster = request.getfixturevalue("postgres")
        made = Backend("postgresql", tmp_path, cluster.new_database(), cluster)
    yield made
    for store in reversed(made.opened):
        store.close()

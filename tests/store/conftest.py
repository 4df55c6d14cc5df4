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


class SyncLevels:
    """The SQL a SQLite store's connections run, traced from the moment the store opens them (its module's `open_db`
    replaced by one that traces), and the `synchronous` level each COMMIT ran under: FULL fsyncs the commit, NORMAL
    only writes it (HATP-STORE-8). `open_db` sets FULL, so a connection starts there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
        self.said: list[str] = []
        opened = module.open_db

        def open_traced(path: Any, **kwargs: Any) -> sqlite3.Connection:
            conn: sqlite3.Connection = opened(path, **kwargs)
            conn.set_trace_callback(self.said.append)
            return conn

        monkeypatch.setattr(module, "open_db", open_traced)

    def commits(self) -> list[str]:
        level, out = "FULL", []
        for statement in self.said:
            words = statement.strip().upper().replace(" ", "")
            if words.startswith("PRAGMASYNCHRONOUS="):
                level = words.split("=", 1)[1]
            elif words == "COMMIT":
                out.append(level)
        return out

    def clear(self) -> None:
        self.said.clear()

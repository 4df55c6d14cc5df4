"""Store schemas are versioned and only move forward (HATP-STORE-1): opening a store migrates what it lacks, once,
and a database whose schema is newer than the code refuses to open, untouched."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import anyio
import psycopg
import pytest

from hatp_mcp.errors import HatpError
from hatp_mcp.store import deliveries, gateway_store, participant_state, replay_cache, txn_bindings, txn_log
from hatp_mcp.store.postgresql import deliveries as pg_deliveries
from hatp_mcp.store.postgresql import gateway_store as pg_gateway
from hatp_mcp.store.postgresql import participant_state as pg_participant
from hatp_mcp.store.postgresql import replay_cache as pg_replay
from hatp_mcp.store.postgresql import txn_bindings as pg_bindings
from hatp_mcp.store.postgresql import txn_log as pg_txn_log
from hatp_mcp.store.postgresql.pools import open_pool
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import open_db
from hatp_mcp.store.url import (
    StoreUrl,
    open_delivery_queue,
    open_gateway_store,
    open_participant_store,
    open_replay_cache,
    open_txn_bindings,
    open_txn_log,
)
from tests.store.conftest import Backend


def _open_log(url: StoreUrl) -> None:
    async def run() -> None:
        async with open_txn_log(url):
            pass

    anyio.run(run)


def _closing(opener: Callable[[StoreUrl], Any]) -> Callable[[StoreUrl], None]:
    return lambda url: opener(url).close()


def _open_queue(url: StoreUrl) -> None:
    """The delivery queue in the file the test names (open_delivery_queue puts it beside the gateway's database)."""
    (deliveries.DeliveryStore(url.target) if url.backend == "sqlite" else open_delivery_queue(url)).close()


# component: (open and close it, its SQLite schema, its PostgreSQL schema)
STORES: dict[str, tuple[Callable[[StoreUrl], None], Schema, Schema]] = {
    "coordinator.log": (_open_log, txn_log.SQLITE_SCHEMA, pg_txn_log.SCHEMA),
    "participant.state": (_closing(open_participant_store), participant_state.SQLITE_SCHEMA, pg_participant.SCHEMA),
    "gateway": (_closing(open_gateway_store), gateway_store.SQLITE_SCHEMA, pg_gateway.SCHEMA),
    "gateway.deliveries": (_open_queue, deliveries.SQLITE_SCHEMA, pg_deliveries.SCHEMA),
    "replay": (_closing(open_replay_cache), replay_cache.SQLITE_SCHEMA, pg_replay.SCHEMA),
    "coordinator.bindings": (_closing(open_txn_bindings), txn_bindings.SQLITE_SCHEMA, pg_bindings.SCHEMA),
}


def _sql(backend: Backend, url: StoreUrl, statement: str, args: tuple[object, ...] = ()) -> list[tuple[Any, ...]]:
    if backend.database is None:
        conn = sqlite3.connect(url.target, isolation_level=None)
        try:
            return conn.execute(statement.replace("%s", "?"), args).fetchall()
        finally:
            conn.close()
    with psycopg.connect(url.target, autocommit=True) as pg:
        cur = pg.execute(statement.encode(), args)
        return cur.fetchall() if cur.description else []


def _tables(backend: Backend, url: StoreUrl) -> list[str]:
    if backend.database is None:
        return [r[0] for r in _sql(backend, url, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    return [
        r[0]
        for r in _sql(backend, url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
    ]


@pytest.mark.parametrize("component", sorted(STORES))
def test_opening_a_store_records_its_schema_version_once(backend: Backend, component: str) -> None:
    opener, lite, pg = STORES[component]
    url = backend.url(component)
    opener(url)
    opener(url)
    version = (pg if backend.database else lite).version
    assert _sql(backend, url, "SELECT component, version FROM hatp_schema") == [(component, version)]


@pytest.mark.parametrize("component", sorted(STORES))
def test_a_database_with_a_newer_schema_than_the_code_refuses_to_open_under_HATP_STORE_1(
    backend: Backend, component: str
) -> None:
    opener, lite, pg = STORES[component]
    url = backend.url(component)
    opener(url)
    newer = (pg if backend.database else lite).version + 1
    _sql(backend, url, "UPDATE hatp_schema SET version = %s WHERE component = %s", (newer, component))
    before = _tables(backend, url)
    with pytest.raises(HatpError) as refused:
        opener(url)
    e = refused.value
    assert (e.rule, e.code, e.path) == ("HATP-STORE-1", "SCHEMA_TOO_NEW", f"hatp_schema.{component}")
    assert f"version {newer}, newer than this code's {newer - 1}" in e.reason
    assert "password" not in e.reason and "schemas only move forward" in e.fix
    # the evidence it leaves: the database as it was, the newer version still there
    assert _tables(backend, url) == before
    assert _sql(backend, url, "SELECT version FROM hatp_schema WHERE component = %s", (component,)) == [(newer,)]


def test_a_sqlite_file_from_before_schema_versions_is_adopted_with_its_rows(tmp_path: Any) -> None:
    path = tmp_path / "coordinator.db"
    old = sqlite3.connect(path, isolation_level=None)
    for statement in txn_log.SQLITE_SCHEMA.steps[0]:  # the tables exactly as the code before versions made them
        old.execute(statement)
    old.execute("INSERT INTO txn (txn_id, plan) VALUES ('t', '{\"p\": 1}')")
    old.close()

    async def run() -> None:
        async with open_txn_log(StoreUrl.sqlite(path)) as log:
            loaded = await log.load("t")
            assert loaded is not None and loaded.plan == {"p": 1}

    anyio.run(run)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM hatp_schema").fetchall() == [(1,)]
    conn.close()


def _migrate(backend: Backend, url: StoreUrl, schema: Schema) -> None:
    if backend.database is None:
        conn = open_db(url.target)
        try:
            migrate_sqlite(conn, schema, url.target)
        finally:
            conn.close()
    else:
        open_pool(url.target, schema).close()


def test_a_failing_step_leaves_the_old_schema_and_version(backend: Backend) -> None:
    url = backend.url("x")
    v1 = Schema("test.part", (("CREATE TABLE first (n INTEGER)",),))
    _migrate(backend, url, v1)
    v2 = Schema("test.part", (*v1.steps, ("CREATE TABLE second (n INTEGER)", "CREATE TABLE first (n INTEGER)")))
    with pytest.raises(sqlite3.OperationalError if backend.database is None else psycopg.errors.DuplicateTable):
        _migrate(backend, url, v2)
    assert "second" not in _tables(backend, url) and "first" in _tables(backend, url)
    assert _sql(backend, url, "SELECT version FROM hatp_schema WHERE component = 'test.part'") == [(1,)]


def test_processes_opening_one_postgresql_database_at_once_migrate_it_once(pg_url: str) -> None:
    errors: list[BaseException] = []
    stores: list[Any] = []

    def open_one() -> None:
        try:
            stores.append(open_gateway_store(StoreUrl("postgresql", pg_url)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and len(stores) == 6
    for s in stores:
        s.close()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT component, version FROM hatp_schema").fetchall() == [
            ("gateway", pg_gateway.SCHEMA.version)
        ]

"""The throwaway cluster the store tests run on is a real PostgreSQL with fsync on, restartable mid-run."""

from __future__ import annotations

import psycopg
import pytest

from tests import postgres_cluster
from tests.postgres_cluster import Cluster


def test_the_test_cluster_is_a_real_postgresql_with_fsync_on(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        version = conn.execute("SHOW server_version_num").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
        sync_commit = conn.execute("SHOW synchronous_commit").fetchone()
    assert version is not None and int(version[0]) >= 150000
    assert fsync == ("on",) and sync_commit == ("on",)


def test_a_fast_restart_keeps_what_was_committed_and_drops_every_connection(postgres: Cluster, pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (n integer)")
        conn.execute("INSERT INTO kept VALUES (1)")
        postgres.restart("fast")
        try:
            conn.execute("SELECT 1")
            dropped = False
        except psycopg.OperationalError:
            dropped = True
    assert dropped
    with psycopg.connect(pg_url) as again:
        assert again.execute("SELECT n FROM kept").fetchall() == [(1,)]


def test_after_a_checkpoint_a_fast_restart_has_next_to_nothing_left_to_flush_while_it_is_down(
    postgres: Cluster,
) -> None:
    log = postgres.root / "log"
    seen = log.stat().st_size
    postgres.new_database()  # files dirty until a checkpoint (its shutdown one would write them all, down)
    postgres.checkpoint()
    postgres.restart("fast")
    with log.open(errors="replace") as text:
        text.seek(seen)
        said = [line.split("LOG:  ", 1)[-1].strip() for line in text if "LOG:  checkpoint " in line]
    shutdown = said.index("checkpoint starting: shutdown immediate")
    wrote = int(said[shutdown + 1].removeprefix("checkpoint complete: wrote ").split()[0])
    assert wrote < 50, said  # without the checkpoint first: every page of the new database (hundreds)


def test_without_postgresql_installed_the_cluster_fails_saying_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_cluster, "find_bindir", lambda: None)
    with pytest.raises(RuntimeError) as missing, postgres_cluster.running_cluster():
        pass  # pragma: no cover - never reached
    assert str(missing.value) == postgres_cluster.MISSING
    assert "make test" in postgres_cluster.MISSING and "apt-get install -y postgresql" in postgres_cluster.MISSING

"""The journal's store on both backends (SQLite, PostgreSQL): durable appends, entries and dead letters together or
not at all, group commit with no gap after a failed append, reopening, the versioned schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from hatp_mcp.errors import HatpError
from hatp_mcp.store.journal_store import SqliteJournalStore
from hatp_mcp.store.url import open_journal_store
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


def ev(seq: int, event: str = "step.started") -> dict[str, object]:
    return {"seq": seq, "event": event, "body": {}}


async def test_an_append_is_durable_and_survives_reopening(backend: Backend) -> None:
    async with open_journal_store(backend.url("journal")) as store:
        await store.append("saga-1", "return", [ev(0, "saga.begin"), ev(1)])
        await store.append("saga-0", "later", [ev(0, "saga.begin")])
    async with open_journal_store(backend.url("journal")) as again:
        loaded = await again.load("saga-1")
        assert loaded is not None and loaded.name == "return" and [e["seq"] for e in loaded.events] == [0, 1]
        assert loaded.events[1] == ev(1)  # read back exactly as written
        assert await again.load("missing") is None
        assert await again.unfinished() == ["saga-1", "saga-0"]  # in the order they began
        await again.append("saga-1", "return", [ev(2, "saga.closed")])
        assert await again.unfinished() == ["saga-0"] and await again.sagas() == ["saga-1", "saga-0"]


async def test_sqlite_runs_in_wal_mode_with_synchronous_full(tmp_path: Path) -> None:
    store = SqliteJournalStore(tmp_path / "j.db")
    mode = store._db.execute("PRAGMA journal_mode").fetchone()[0]
    sync = store._db.execute("PRAGMA synchronous").fetchone()[0]
    assert (mode, sync) == ("wal", 2)  # WAL, synchronous=FULL
    store.close()


async def test_entries_and_their_dead_letter_are_written_together_or_not_at_all_HATP_JRN_8(backend: Backend) -> None:
    async with open_journal_store(backend.url("journal")) as store:
        await store.append("saga-1", "return", [ev(0, "saga.begin")])
        with pytest.raises(backend.integrity_error):  # seq 0 again: the whole append fails
            await store.append("saga-1", "return", [ev(1, "undo.gave-up"), ev(0)], [{"stepId": "s1"}])
        loaded = await store.load("saga-1")
        assert loaded is not None and len(loaded.events) == 1 and await store.dead_letters() == []
        ids = await store.append("saga-1", "return", [ev(1, "undo.gave-up")], [{"stepId": "s1", "error": "500"}])
        more = await store.append("saga-1", "return", [ev(2, "undo.gave-up")], [{"stepId": "s0"}, {"stepId": "s9"}])
        rows = await store.dead_letters(unalerted_only=True)
        assert [r.id for r in rows] == ids + more and len(set(ids + more)) == 3
        assert rows[0].entry == {"stepId": "s1", "error": "500"}
        await store.mark_alerted(ids[0])
        assert [r.id for r in await store.dead_letters(unalerted_only=True)] == more
        assert (await store.dead_letters())[0].alerted


async def test_appends_queued_together_are_one_batch_and_none_follows_a_failed_one_HATP_JRN_2(
    backend: Backend,
) -> None:
    async with open_journal_store(backend.url("journal")) as store:
        await store.append("saga-1", "a", [ev(0, "saga.begin")])
        await store.append("saga-2", "b", [ev(0, "saga.begin")])
        before = store.appends
        results: dict[str, Any] = {}

        async def wait(name: str, pending: Any) -> None:
            try:
                results[name] = await pending
            except Exception as exc:
                results[name] = exc

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                first = store.submit("saga-1", "a", [ev(1)])
                bad = store.submit("saga-2", "b", [ev(0)])  # seq 0 again: fails its batch
                tg.start_soon(wait, "first", first)
                tg.start_soon(wait, "bad", bad)
        assert isinstance(results["bad"], backend.integrity_error)
        assert isinstance(results["first"], backend.integrity_error)
        assert store.appends == before  # one batch, rolled back whole
        with pytest.raises(RuntimeError, match="earlier append"):
            await store.append("saga-1", "a", [ev(2)])  # behind saga-1's failed seq 1: refused, no gap in the chain
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:  # a writer starting again from what is durable goes on
                tg.start_soon(wait, "x", store.submit("saga-1", "a", [ev(1)]))
                tg.start_soon(wait, "y", store.submit("saga-1", "a", [ev(2)]))
        assert results["x"] == [] and results["y"] == []
        assert store.appends == before + 1  # both in one durable batch
        loaded = await store.load("saga-1")
        assert loaded is not None and [e["seq"] for e in loaded.events] == [0, 1, 2]


async def test_a_journal_store_newer_than_the_code_is_refused_HATP_STORE_1(backend: Backend) -> None:
    async with open_journal_store(backend.url("journal")) as store:
        await store.append("saga-1", "a", [ev(0, "saga.begin")])
    sql = "UPDATE hatp_schema SET version = 99 WHERE component = 'journal'"
    if backend.database is not None:
        with psycopg.connect(backend.database, autocommit=True) as conn:
            conn.execute(sql)
    else:
        with sqlite3.connect(backend.url("journal").target) as conn:
            conn.execute(sql)
    with pytest.raises(HatpError) as refused:
        async with open_journal_store(backend.url("journal")):
            pass
    assert (refused.value.rule, refused.value.code) == ("HATP-STORE-1", "SCHEMA_TOO_NEW")


async def test_a_sqlite_journal_written_before_the_schema_was_versioned_opens_as_version_1(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the tables as the first release created them, no hatp_schema
        conn.execute(
            "CREATE TABLE journal_saga (saga_id TEXT PRIMARY KEY, name TEXT NOT NULL,"
            " closed INTEGER NOT NULL DEFAULT 0)"
        )
        conn.execute(
            "CREATE TABLE journal_event (saga_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL,"
            " PRIMARY KEY (saga_id, seq))"
        )
        conn.execute(
            "CREATE TABLE journal_dead_letter (id INTEGER PRIMARY KEY AUTOINCREMENT, saga_id TEXT NOT NULL,"
            " entry TEXT NOT NULL, alerted INTEGER NOT NULL DEFAULT 0)"
        )
        conn.execute("INSERT INTO journal_saga (saga_id, name) VALUES ('old', 'kept')")
        conn.execute("""INSERT INTO journal_event VALUES ('old', 0, '{"seq": 0, "event": "saga.begin", "body": {}}')""")
    store = SqliteJournalStore(path)
    loaded = await store.load("old")
    assert loaded is not None and loaded.name == "kept" and await store.unfinished() == ["old"]
    assert store._db.execute("SELECT version FROM hatp_schema WHERE component = 'journal'").fetchone() == (1,)
    store.close()


@pytest.mark.anyio
async def test_a_journal_writer_cancelled_natively_mid_write_leaves_no_append_hanging_HATP_JRN_2() -> None:
    """HATP-JRN-2, the journal's group commit: a leader whose task asyncio itself cancels (task.cancel() passes the
    write's anyio shield) while its batch is written must settle its batch and those queued behind it as failed
    (LogInterrupted), never as durable and never by leaving them waiting; the saga's next append is refused."""
    import asyncio

    from hatp_mcp.store.errors import LogInterrupted
    from hatp_mcp.store.journal_store import PendingAppend, journal_group, submit_append

    writing = asyncio.Event()
    never = asyncio.Event()
    written: list[list[str]] = []

    async def write(batch: list[PendingAppend]) -> None:
        writing.set()
        await never.wait()  # in flight when the leader is cancelled
        written.append([p.saga_id for p in batch])

    group = journal_group(write)
    leader = asyncio.ensure_future(submit_append(group, "s1", "a", [{"seq": 1}]))
    await writing.wait()
    follower = asyncio.ensure_future(submit_append(group, "s2", "b", [{"seq": 4}]))
    for _ in range(3):
        await asyncio.sleep(0)  # the follower queues behind the write in flight
    leader.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert leader.done() and leader.cancelled()
    assert follower.done(), "an append queued behind a cancelled writer waits forever"
    assert isinstance(follower.exception(), LogInterrupted)
    assert written == []
    later = asyncio.ensure_future(submit_append(group, "s2", "c", [{"seq": 5}]))  # would leave a gap after seq 4
    for _ in range(3):
        await asyncio.sleep(0)
    assert later.done() and isinstance(later.exception(), RuntimeError)
    assert "an earlier append (seq 4) failed" in str(later.exception())


async def test_HATP_JRN_25_a_steps_started_and_completed_entries_are_each_committed_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hatp_mcp.store import journal_store
    from tests.store.conftest import SyncLevels

    levels = SyncLevels(monkeypatch, journal_store)
    store = SqliteJournalStore(tmp_path / "forced.db")
    try:
        levels.clear()
        await store.append("saga-f", "trip", [ev(0, "saga.begin")])
        await store.append("saga-f", "trip", [ev(1, "step.started")])  # before the call goes out
        await store.append("saga-f", "trip", [ev(2, "step.completed")])  # before its result is answered
        assert levels.commits() == ["FULL", "FULL", "FULL"]
    finally:
        store.close()


async def test_HATP_JRN_25_a_journal_store_whose_commits_would_not_be_fsynced_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hatp_mcp.store import journal_store
    from hatp_mcp.store.sqlite import open_db

    def unforced(path: object, **kwargs: object) -> sqlite3.Connection:
        conn = open_db(str(path))
        conn.execute("PRAGMA synchronous=NORMAL")  # the planted violation: steps written, not fsynced
        return conn

    monkeypatch.setattr(journal_store, "open_db", unforced)
    with pytest.raises(HatpError) as info:
        SqliteJournalStore(tmp_path / "unforced.db")
    assert (info.value.rule, info.value.code) == ("HATP-JRN-25", "STORE_NOT_DURABLE")

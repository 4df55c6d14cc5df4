"""The journal's SQLite store: durable appends, entries and dead letters together or not at all, reopening."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hatp_mcp.store.journal_store import SqliteJournalStore


def ev(seq: int, event: str = "step.started") -> dict[str, object]:
    return {"seq": seq, "event": event, "body": {}}


@pytest.mark.anyio
async def test_an_append_is_durable_and_survives_reopening(tmp_path: Path) -> None:
    store = SqliteJournalStore(tmp_path / "j.db")
    await store.append("saga-1", "return", [ev(0, "saga.begin"), ev(1)])
    store.close()
    again = SqliteJournalStore(tmp_path / "j.db")
    loaded = await again.load("saga-1")
    assert loaded is not None and loaded.name == "return" and [e["seq"] for e in loaded.events] == [0, 1]
    assert await again.unfinished() == ["saga-1"]
    await again.append("saga-1", "return", [ev(2, "saga.closed")])
    assert await again.unfinished() == [] and await again.sagas() == ["saga-1"]
    mode = again._db.execute("PRAGMA journal_mode").fetchone()[0]
    sync = again._db.execute("PRAGMA synchronous").fetchone()[0]
    assert (mode, sync) == ("wal", 2)  # WAL, synchronous=FULL
    again.close()


@pytest.mark.anyio
async def test_entries_and_their_dead_letter_are_written_together_or_not_at_all_HATP_JRN_8(tmp_path: Path) -> None:
    store = SqliteJournalStore(tmp_path / "j.db")
    await store.append("saga-1", "return", [ev(0, "saga.begin")])
    with pytest.raises(sqlite3.IntegrityError):  # seq 0 again: the whole append fails
        await store.append("saga-1", "return", [ev(1, "undo.gave-up"), ev(0)], [{"stepId": "s1"}])
    loaded = await store.load("saga-1")
    assert loaded is not None and len(loaded.events) == 1 and await store.dead_letters() == []
    ids = await store.append("saga-1", "return", [ev(1, "undo.gave-up")], [{"stepId": "s1", "error": "500"}])
    rows = await store.dead_letters(unalerted_only=True)
    assert [r.id for r in rows] == ids and rows[0].entry == {"stepId": "s1", "error": "500"}
    await store.mark_alerted(ids[0])
    assert await store.dead_letters(unalerted_only=True) == [] and (await store.dead_letters())[0].alerted
    store.close()


@pytest.mark.anyio
async def test_appends_queued_together_are_one_batch_and_none_follows_a_failed_one_HATP_JRN_2(
    tmp_path: Path,
) -> None:
    import anyio

    store = SqliteJournalStore(tmp_path / "j.db")
    await store.append("saga-1", "a", [ev(0, "saga.begin")])
    await store.append("saga-2", "b", [ev(0, "saga.begin")])
    before = store.appends
    results: dict[str, object] = {}

    async def wait(name: str, pending: object) -> None:
        try:
            results[name] = await pending  # type: ignore[misc]
        except Exception as exc:
            results[name] = exc

    async with anyio.create_task_group() as tg:
        first = store.submit("saga-1", "a", [ev(1)])
        bad = store.submit("saga-2", "b", [ev(0)])  # seq 0 again: fails its batch
        tg.start_soon(wait, "first", first)
        tg.start_soon(wait, "bad", bad)
    assert isinstance(results["bad"], sqlite3.IntegrityError) and isinstance(results["first"], sqlite3.IntegrityError)
    assert store.appends == before  # one batch, rolled back whole
    with pytest.raises(RuntimeError, match="earlier append"):
        await store.append("saga-1", "a", [ev(2)])  # behind saga-1's failed seq 1: refused, no gap in the chain
    async with anyio.create_task_group() as tg:  # a writer starting again from what is durable goes on
        tg.start_soon(wait, "x", store.submit("saga-1", "a", [ev(1)]))
        tg.start_soon(wait, "y", store.submit("saga-1", "a", [ev(2)]))
    assert results["x"] == [] and results["y"] == []
    loaded = await store.load("saga-1")
    assert loaded is not None and [e["seq"] for e in loaded.events] == [0, 1, 2]
    store.close()

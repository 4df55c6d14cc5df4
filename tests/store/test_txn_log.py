"""The coordinator's decision log on both backends: durable, group-committed across transactions, read back as
written; on SQLite in WAL mode with synchronous=FULL."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import anyio
import pytest

from hatp_mcp.store.sqlite import open_db
from hatp_mcp.store.txn_log import LogEntry, SqliteTxnLog
from hatp_mcp.store.url import open_txn_log
from tests.store.conftest import Backend


def ev(seq: int, event: str = "vote") -> LogEntry:
    return LogEntry("event", {"seq": seq, "event": event})


@pytest.mark.anyio
async def test_appends_from_concurrent_transactions_are_group_committed(backend: Backend) -> None:
    async with open_txn_log(backend.url("txn")) as log:

        async def one(i: int) -> None:
            await log.append(f"t{i}", [LogEntry("plan", {"txnId": f"t{i}"}), ev(0, "txn.begin")])
            await log.append(f"t{i}", [LogEntry("decision", {"decision": "commit"}), ev(1, "decision")])

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for i in range(40):
                    tg.start_soon(one, i)
        assert log.appends == 80
        assert log.batches < log.appends  # HATP-TXN-15: one durable commit served several transactions
        loaded = await log.load("t7")
        assert loaded is not None and loaded.decision == "commit" and [e["seq"] for e in loaded.events] == [0, 1]


@pytest.mark.anyio
async def test_the_log_survives_reopening_and_lists_what_is_unfinished(backend: Backend) -> None:
    async with open_txn_log(backend.url("txn")) as log:
        await log.append("open", [LogEntry("plan", {"p": 1}), ev(0, "txn.begin")])
        await log.append("done", [LogEntry("plan", {"p": 2}), ev(0, "txn.begin"), ev(1, "record.closed")])
        await log.append("later", [LogEntry("plan", {"p": 3}), ev(0, "txn.begin")])
        await log.append("open", [LogEntry("decision", {"decision": "commit", "reason": "yes"})])
        await log.append("open", [LogEntry("decision", {"decision": "abort", "reason": "refused"})])
    async with open_txn_log(backend.url("txn")) as again:
        assert await again.unfinished() == ["open", "later"]  # in the order they began
        loaded = await again.load("open")
        assert loaded is not None and loaded.decision == "abort" and loaded.plan == {"p": 1}  # the latest decision
        assert await again.load("missing") is None


@pytest.mark.anyio
async def test_a_failed_batch_keeps_nothing_and_tells_the_caller(backend: Backend) -> None:
    async with open_txn_log(backend.url("txn")) as log:
        await log.append("t", [LogEntry("plan", {}), ev(0)])
        with pytest.raises(backend.integrity_error):
            await log.append("t", [ev(1), ev(1)])
        loaded = await log.load("t")
        assert loaded is not None and len(loaded.events) == 1


@pytest.mark.anyio
async def test_an_event_holding_an_integer_beyond_64_bits_reads_back_exactly(backend: Backend) -> None:
    async with open_txn_log(backend.url("txn")) as log:
        await log.append("t", [LogEntry("plan", {"n": 2**70}), LogEntry("event", {"seq": 0, "x": "é", "n": -(2**65)})])
        loaded = await log.load("t")
    assert loaded is not None and loaded.plan == {"n": 2**70} and loaded.events == [{"seq": 0, "x": "é", "n": -(2**65)}]


def test_the_sqlite_log_is_opened_in_wal_mode_with_synchronous_full(tmp_path: Path) -> None:
    log = SqliteTxnLog(tmp_path / "txn.db")
    log.close()
    db = sqlite3.connect(tmp_path / "txn.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # HATP-TXN-15
    db.close()
    conn = open_db(tmp_path / "txn.db")
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn.close()


@pytest.mark.anyio
async def test_a_read_whose_caller_stopped_waiting_still_runs_and_the_log_serves_the_next_call(tmp_path: Path) -> None:
    """The log's thread hands each result back to the awaiting coroutine (one call_soon_threadsafe): a caller
    cancelled while its job runs stops waiting, the job runs to its end, and handing its result to nobody is no
    error on the loop."""
    loop_errors: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    log = SqliteTxnLog(tmp_path / "txn.db")
    try:
        await log.append("t", [LogEntry("plan", {"p": 1}), ev(0, "txn.begin")])
        scope = anyio.CancelScope()
        answers: list[object] = []

        async def load() -> None:
            with scope:
                answers.append(await log.load("t"))

        with anyio.fail_after(30):
            log._mutex.acquire()  # the job blocks on the log's thread until released
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(load)
                    while log.idle:  # the job was handed to the thread
                        await anyio.lowlevel.checkpoint()
                    scope.cancel()
            finally:
                log._mutex.release()
            loaded = await log.load("t")  # after the abandoned job, on the same single thread
    finally:
        log.close()
    assert answers == [] and scope.cancelled_caught
    assert loaded is not None and loaded.plan == {"p": 1}
    assert loop_errors == []


@pytest.mark.anyio
async def test_a_leader_cancelled_natively_mid_write_leaves_no_waiter_hanging_HATP_TXN_15() -> None:
    """HATP-TXN-15, GroupCommit: a leader whose task asyncio itself cancels (task.cancel(), which an anyio shield
    does not stop) while its batch is being written must settle every append it was carrying, and those queued
    behind it, with an error: none of them may wait forever, and none may be told it is durable."""
    from hatp_mcp.store.errors import LogInterrupted
    from hatp_mcp.store.group_commit import GroupCommit
    from hatp_mcp.store.txn_log import Pending

    writing = asyncio.Event()
    never = asyncio.Event()
    written: list[list[str]] = []

    async def write(batch: list[Pending]) -> None:
        writing.set()
        await never.wait()  # the write is in flight when the leader is cancelled
        written.append([p.txn_id for p in batch])

    group: GroupCommit[Pending] = GroupCommit(write)
    leader = asyncio.ensure_future(group.submit(Pending("t-lead", [LogEntry("plan", {})])))
    await writing.wait()
    follower = asyncio.ensure_future(group.submit(Pending("t-follow", [LogEntry("plan", {})])))
    for _ in range(3):
        await asyncio.sleep(0)  # the follower queues behind the write in flight
    leader.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert leader.done() and leader.cancelled()
    assert follower.done(), "an append queued behind a cancelled leader waits forever"
    assert isinstance(follower.exception(), LogInterrupted)
    assert written == [] and group.queue == [] and not group.writing


@pytest.mark.anyio
async def test_HATP_STORE_8_a_forced_append_commits_fsynced_and_an_unforced_one_only_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hatp_mcp.store import txn_log
    from tests.store.conftest import SyncLevels

    levels = SyncLevels(monkeypatch, txn_log)
    log = SqliteTxnLog(tmp_path / "levels.db")
    try:
        levels.clear()  # the schema's own commits
        await log.append("t", [LogEntry("plan", {"txnId": "t"}), ev(0, "txn.begin")])
        await log.append("t", [ev(1, "outcome.decided")], forced=False)
        await log.append("t", [ev(2, "vote")], forced=False)
        await log.append("t", [LogEntry("decision", {"decision": "commit"}), ev(3, "decision")], forced=True)
        assert levels.commits() == ["FULL", "NORMAL", "NORMAL", "FULL"]
        levels.clear()

        async def both() -> None:  # one group commit with a forced and an unforced append: fsynced
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: log.append("u", [LogEntry("plan", {"txnId": "u"})], forced=False))
                tg.start_soon(lambda: log.append("v", [LogEntry("plan", {"txnId": "v"})], forced=True))

        await both()
        assert "FULL" in levels.commits()  # a batch holding a forced append is never written unforced
        loaded = await log.load("t")
        assert loaded is not None and [e["seq"] for e in loaded.events] == [0, 1, 2, 3]
    finally:
        log.close()


@pytest.mark.anyio
async def test_HATP_STORE_8_a_forced_append_of_nothing_fsyncs_the_unforced_writes_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from hatp_mcp.store import txn_log
    from tests.store.conftest import SyncLevels

    synced: list[str] = []
    fsync = os.fsync

    def traced(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        fsync(fd)

    monkeypatch.setattr(txn_log.os, "fsync", traced)
    levels = SyncLevels(monkeypatch, txn_log)
    path = tmp_path / "sync.db"
    log = SqliteTxnLog(path)
    try:
        levels.clear()
        await log.append("t", [LogEntry("plan", {"txnId": "t"}), ev(0, "txn.begin")], forced=False)  # the begin
        await log.append("t", [], forced=True)  # HATP-TXN-27: made durable while its prepares are out
        assert levels.commits() == ["NORMAL"] and synced == [f"{path}-wal"]  # SQLite commits nothing to fsync
        await log.append("t", [ev(1, "decision")], forced=True)
        await log.append("t", [], forced=True)  # nothing unforced since the last forced commit: nothing to do
        assert levels.commits() == ["NORMAL", "FULL"] and synced == [f"{path}-wal"]
        loaded = await log.load("t")
        assert loaded is not None and [e["seq"] for e in loaded.events] == [0, 1]
    finally:
        log.close()

"""The coordinator's SQLite log: durable, WAL + synchronous=FULL, group commit across transactions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from hatp_mcp.store.txn_log import LogEntry, SqliteTxnLog


def ev(seq: int, event: str = "vote") -> LogEntry:
    return LogEntry("event", {"seq": seq, "event": event})


@pytest.mark.anyio
async def test_appends_from_concurrent_transactions_are_group_committed(tmp_path: Path) -> None:
    log = SqliteTxnLog(tmp_path / "txn.db")

    async def one(i: int) -> None:
        await log.append(f"t{i}", [LogEntry("plan", {"txnId": f"t{i}"}), ev(0, "txn.begin")])
        await log.append(f"t{i}", [LogEntry("decision", {"decision": "commit"}), ev(1, "decision")])

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(40):
                tg.start_soon(one, i)
    assert log.appends == 80
    assert log.batches < log.appends  # HATP-TXN-15: one fsync served several transactions
    loaded = await log.load("t7")
    assert loaded is not None and loaded.decision == "commit" and [e["seq"] for e in loaded.events] == [0, 1]
    log.close()


@pytest.mark.anyio
async def test_the_log_survives_reopening_and_lists_what_is_unfinished(tmp_path: Path) -> None:
    path = tmp_path / "txn.db"
    log = SqliteTxnLog(path)
    await log.append("open", [LogEntry("plan", {"p": 1}), ev(0, "txn.begin")])
    await log.append("done", [LogEntry("plan", {"p": 2}), ev(0, "txn.begin"), ev(1, "record.closed")])
    await log.append("open", [LogEntry("decision", {"decision": "commit", "reason": "yes"})])
    await log.append("open", [LogEntry("decision", {"decision": "abort", "reason": "refused"})])
    log.close()
    again = SqliteTxnLog(path)
    assert await again.unfinished() == ["open"]
    loaded = await again.load("open")
    assert loaded is not None and loaded.decision == "abort" and loaded.plan == {"p": 1}  # the latest decision
    assert await again.load("missing") is None
    again.close()


def test_the_log_is_opened_in_wal_mode_with_synchronous_full(tmp_path: Path) -> None:
    log = SqliteTxnLog(tmp_path / "txn.db")
    log.close()
    db = sqlite3.connect(tmp_path / "txn.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # HATP-TXN-15
    db.close()
    from hatp_mcp.store.sqlite import open_db

    conn = open_db(tmp_path / "txn.db")
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    conn.close()


@pytest.mark.anyio
async def test_a_failed_batch_keeps_nothing_and_tells_the_caller(tmp_path: Path) -> None:
    log = SqliteTxnLog(tmp_path / "txn.db")
    await log.append("t", [LogEntry("plan", {}), ev(0)])
    with pytest.raises(sqlite3.IntegrityError):
        await log.append("t", [ev(1), ev(1)])
    loaded = await log.load("t")
    assert loaded is not None and len(loaded.events) == 1
    log.close()

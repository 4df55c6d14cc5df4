"""The PostgreSQL decision log's forced and unforced appends (spec/store.md HATP-STORE-8/9), on a real PostgreSQL:
the synchronous_commit each write's database transaction commits under, read inside that transaction just before
its commit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import psycopg
import pytest

from hatp_mcp.store.postgresql import txn_log as pg_txn_log
from hatp_mcp.store.postgresql.txn_log import PostgresTxnLog
from hatp_mcp.store.txn_log import LogEntry, Pending


def ev(seq: int, event: str = "vote") -> LogEntry:
    return LogEntry("event", {"seq": seq, "event": event})


class Commits:
    """Each durable write of the log: the `forced` flags of its batch and the synchronous_commit its database
    transaction is about to commit under (`SHOW`, run in that transaction after the write's own statements)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[tuple[tuple[bool, ...], str]] = []
        self._batch: tuple[bool, ...] = ()
        real_write = PostgresTxnLog._write
        real_run = pg_txn_log.run_async

        async def write(log: PostgresTxnLog, batch: Sequence[Pending]) -> None:
            self._batch = tuple(p.forced for p in batch)
            await real_write(log, batch)

        async def run(pool: Any, work: Callable[[Any], Awaitable[Any]], *, idempotent: bool) -> Any:
            async def traced(conn: psycopg.AsyncConnection[Any]) -> Any:
                result = await work(conn)
                row = await (await conn.execute("SHOW synchronous_commit")).fetchone()
                self.seen.append((self._batch, str(row[0]) if row else "?"))
                return result

            return await real_run(pool, traced, idempotent=idempotent)

        monkeypatch.setattr(PostgresTxnLog, "_write", write)
        monkeypatch.setattr(pg_txn_log, "run_async", run)


@pytest.mark.anyio
async def test_HATP_STORE_9_an_unforced_append_commits_without_waiting_and_a_forced_one_never_does(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HATP-STORE-9 (planted: a batch holding a forced append committed with synchronous_commit off)"""
    commits = Commits(monkeypatch)
    log = await PostgresTxnLog.open(pg_url, "A", lease_seconds=300)
    try:
        with anyio.fail_after(30):
            await log.append("t", [LogEntry("plan", {"txnId": "t"}), ev(0, "txn.begin")])
            await log.append("t", [ev(1, "outcome.decided")], forced=False)
            await log.append("t", [LogEntry("decision", {"decision": "commit"}), ev(2, "decision")])
            assert commits.seen == [((True,), "on"), ((False,), "off"), ((True,), "on")]
            commits.seen.clear()

            # a forced and an unforced append queued behind a write in flight share the next batch: forced
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: log.append("t", [ev(3, "vote")]))
                tg.start_soon(lambda: log.append("t", [ev(4, "receipt")], forced=False))
                tg.start_soon(lambda: log.append("t", [ev(5, "commit")]))
            assert ((False, True), "on") in commits.seen, commits.seen
            assert all(setting == "on" for forced, setting in commits.seen if any(forced))

            # an unforced write after them is unforced again: the setting was its write's alone (SET LOCAL)
            await log.append("t", [ev(6, "commit")], forced=False)
            assert commits.seen[-1] == ((False,), "off")
            loaded = await log.load("t")
            assert loaded is not None and [e["seq"] for e in loaded.events] == list(range(7))
    finally:
        await log.aclose()


@pytest.mark.anyio
async def test_HATP_STORE_9_a_forced_append_of_nothing_commits_a_transaction_that_flushes_the_wal(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HATP-STORE-8/9: a transaction without an id commits nothing to the WAL and flushes nothing, so the sync
    after an unforced begin (HATP-TXN-27) must commit one that has an id, with synchronous_commit on."""
    seen: list[tuple[str, bool]] = []
    real_run = pg_txn_log.run_async

    async def run(pool: Any, work: Callable[[Any], Awaitable[Any]], *, idempotent: bool) -> Any:
        async def traced(conn: psycopg.AsyncConnection[Any]) -> Any:
            result = await work(conn)
            row = await (
                await conn.execute(
                    "SELECT current_setting('synchronous_commit'), pg_current_xact_id_if_assigned() IS NOT NULL"
                )
            ).fetchone()
            assert row is not None
            seen.append((str(row[0]), bool(row[1])))
            return result

        return await real_run(pool, traced, idempotent=idempotent)

    monkeypatch.setattr(pg_txn_log, "run_async", run)
    log = await PostgresTxnLog.open(pg_url, "A", lease_seconds=300)
    try:
        with anyio.fail_after(30):
            await log.append("s", [LogEntry("plan", {"txnId": "s"}), ev(0, "txn.begin")], forced=False)
            await log.append("s", [], forced=True)
            assert seen == [("off", True), ("on", True)]
            loaded = await log.load("s")
            assert loaded is not None and [e["seq"] for e in loaded.events] == [0]
    finally:
        await log.aclose()

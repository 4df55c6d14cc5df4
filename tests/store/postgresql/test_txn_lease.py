"""Ownership leases in the shared decision log (spec/store.md HATP-STORE-4..6), on a real PostgreSQL: two
coordinators' logs on one database. Lapse is made by a lease of 0 seconds (the database's own clock decides
expiry), never by waiting."""

from __future__ import annotations

import anyio
import psycopg
import pytest
from psycopg.errors import IdleInTransactionSessionTimeout

from hatp_mcp.errors import HatpError
from hatp_mcp.store.postgresql.pools import open_async_pool, run_async
from hatp_mcp.store.postgresql.txn_log import SCHEMA, PostgresTxnLog, session_options
from hatp_mcp.store.txn_log import Lease, LogEntry, TxnLeases


def ev(seq: int, event: str = "vote") -> LogEntry:
    return LogEntry("event", {"seq": seq, "event": event})


async def begin(log: PostgresTxnLog, txn_id: str) -> None:
    await log.append(txn_id, [LogEntry("plan", {"txnId": txn_id}), ev(0, "txn.begin")])


@pytest.mark.anyio
async def test_HATP_STORE_4_the_coordinator_that_begins_owns_at_epoch_1_and_a_live_lease_is_not_taken(
    pg_url: str,
) -> None:
    """HATP-STORE-4"""
    a = await PostgresTxnLog.open(pg_url, "A", lease_seconds=300)
    b = await PostgresTxnLog.open(pg_url, "B", lease_seconds=300)
    try:
        with anyio.fail_after(30):
            await begin(a, "t1")
            assert isinstance(a, TxnLeases) and a.epoch("t1") == 1 and b.epoch("t1") is None
            assert await b.take_lapsed(10) == []  # A's lease is live
            assert await a.renew() == []
            # B cannot begin a transaction A owns: its plan append is refused and writes nothing
            with pytest.raises(HatpError) as refused:
                await b.append("t1", [LogEntry("plan", {"txnId": "t1"}), ev(1, "forged")])
            assert refused.value.rule == "HATP-STORE-5" and refused.value.code == "STALE_COORDINATOR"
            loaded = await a.load("t1")
            assert loaded is not None and [e["seq"] for e in loaded.events] == [0]
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.anyio
async def test_HATP_STORE_5_a_lapsed_lease_is_taken_at_the_next_epoch_and_the_stale_owner_is_refused(
    pg_url: str,
) -> None:
    """HATP-STORE-5 (planted: the first owner appends after the takeover)"""
    a = await PostgresTxnLog.open(pg_url, "A", lease_seconds=0)  # every lease A takes has lapsed at once
    b = await PostgresTxnLog.open(pg_url, "B", lease_seconds=300)
    try:
        with anyio.fail_after(30):
            await begin(a, "t1")
            await a.append("t1", [ev(1)])  # A still owns it: nobody took it
            assert await b.take_lapsed(10) == [Lease("t1", 2)]
            with pytest.raises(HatpError) as stale:
                await a.append("t1", [LogEntry("decision", {"decision": "commit"}), ev(2, "decision")])
            assert stale.value.rule == "HATP-STORE-5" and stale.value.code == "STALE_COORDINATOR"
            assert "owned by 'B' at epoch 2" in stale.value.reason and "epoch 1" in stale.value.reason
            assert a.epoch("t1") is None  # A dropped it: it no longer renews it
            assert await a.renew() == []
            await b.append("t1", [LogEntry("decision", {"decision": "abort"}), ev(2, "decision")])
            loaded = await b.load("t1")
            assert loaded is not None and loaded.decision == "abort"  # nothing of A's refused append was kept
            assert [e["seq"] for e in loaded.events] == [0, 1, 2]
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.anyio
async def test_HATP_STORE_4_renew_reports_a_lease_taken_over(pg_url: str) -> None:
    """HATP-STORE-4"""
    a = await PostgresTxnLog.open(pg_url, "A", lease_seconds=0)
    b = await PostgresTxnLog.open(pg_url, "B", lease_seconds=300)
    try:
        with anyio.fail_after(30):
            await begin(a, "t1")
            await begin(a, "t2")
            assert [x.txn_id for x in await b.take_lapsed(1)] == ["t1"]  # oldest first, at most `limit`
            assert await a.renew() == ["t1"]  # t1 is B's now; t2 is still A's (renewed, lapsed again at once)
            assert a.epoch("t2") == 1 and a.epoch("t1") is None
            assert await b.take_lapsed(10, exclude=["t2"]) == []
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.anyio
async def test_HATP_STORE_6_closed_transactions_are_never_taken(pg_url: str) -> None:
    """HATP-STORE-6"""
    a = await PostgresTxnLog.open(pg_url, "A", lease_seconds=0)
    b = await PostgresTxnLog.open(pg_url, "B", lease_seconds=300)
    try:
        with anyio.fail_after(30):
            await begin(a, "t1")
            await a.append("t1", [ev(1, "record.closed")])
            assert await b.take_lapsed(10) == []
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.anyio
async def test_HATP_STORE_6_concurrent_takers_share_the_lapsed_transactions_never_both_taking_one(pg_url: str) -> None:
    """HATP-STORE-6: FOR UPDATE SKIP LOCKED; three coordinators take 30 lapsed transactions at once"""
    a = await PostgresTxnLog.open(pg_url, "A", lease_seconds=0)
    takers = [await PostgresTxnLog.open(pg_url, f"T{i}", lease_seconds=300) for i in range(3)]
    try:
        with anyio.fail_after(60):
            for i in range(30):
                await begin(a, f"t{i}")
            taken: dict[str, list[Lease]] = {}

            async def take(log: PostgresTxnLog) -> None:
                got: list[Lease] = []
                while batch := await log.take_lapsed(4):
                    got += batch
                taken[log.owner] = got

            async with anyio.create_task_group() as tg:
                for log in takers:
                    tg.start_soon(take, log)
            all_ids = [lease.txn_id for got in taken.values() for lease in got]
            assert sorted(all_ids) == sorted(f"t{i}" for i in range(30))  # each taken exactly once
            assert {lease.epoch for got in taken.values() for lease in got} == {2}
    finally:
        await a.aclose()
        for log in takers:
            await log.aclose()


@pytest.mark.anyio
async def test_HATP_STORE_7_a_coordinator_stopped_inside_a_log_write_does_not_keep_its_lapsed_lease(
    pg_url: str,
) -> None:
    """HATP-STORE-7 (planted: A's session stops inside a write, holding the lease row as an append's fence does)"""
    a = await PostgresTxnLog.open(pg_url, "A", lease_seconds=0)  # lapsed at once; its sessions end idle after 1 s
    b = await PostgresTxnLog.open(pg_url, "B", lease_seconds=300)
    stopped = await psycopg.AsyncConnection.connect(pg_url, options=session_options(a.lease_seconds))
    try:
        with anyio.fail_after(30):
            await begin(a, "t1")
            await stopped.execute("BEGIN")
            await stopped.execute("SELECT epoch FROM txn_lease WHERE txn_id = 't1' FOR SHARE")
            # ... and A's process is stopped here (SIGSTOP, a pause, a machine gone with its socket open)
            assert await b.take_lapsed(10) == []  # the row is locked: skipped, not waited for
            async with await psycopg.AsyncConnection.connect(pg_url) as waiter, waiter.transaction():
                # the server ends A's idle session after the limit, and the row lock goes with it
                await waiter.execute("SELECT 1 FROM txn_lease WHERE txn_id = 't1' FOR UPDATE")
            assert await b.take_lapsed(10) == [Lease("t1", 2)]
            with pytest.raises(IdleInTransactionSessionTimeout):
                await stopped.execute("SELECT 1")  # A's session was ended: what it had begun was rolled back
    finally:
        await stopped.close()
        await a.aclose()
        await b.aclose()


@pytest.mark.anyio
async def test_HATP_STORE_7_a_write_whose_idle_session_the_server_ended_is_written_on_a_fresh_one(pg_url: str) -> None:
    """HATP-STORE-7: the ended session kept nothing, so the write is tried again (once) and kept once"""
    log = await PostgresTxnLog.open(pg_url, "A", lease_seconds=0)
    await begin(log, "t1")
    pool = await open_async_pool(pg_url, SCHEMA, options=session_options(0))
    tries = 0

    async def write(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        nonlocal tries
        tries += 1
        await conn.execute("INSERT INTO txn_decision (txn_id, n, decision) VALUES ('t1', 0, 'abort')")
        if tries == 1:  # this process stalls here, inside its transaction, until the server ends the session
            async with await psycopg.AsyncConnection.connect(pg_url) as waiter, waiter.transaction():
                await waiter.execute("LOCK TABLE txn_decision IN EXCLUSIVE MODE")  # granted once that session ended

    try:
        with anyio.fail_after(30):
            await run_async(pool, write, idempotent=False)
        assert tries == 2
        async with pool.connection() as conn:
            rows = await (await conn.execute("SELECT decision FROM txn_decision WHERE txn_id = 't1'")).fetchall()
        assert rows == [("abort",)]
    finally:
        await pool.close()
        await log.aclose()

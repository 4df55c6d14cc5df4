"""PostgreSQL stores refuse a server that would lose acknowledged commits (HATP-STORE-3), and reconnect after the
server restarts under them without losing anything they reported committed (`pg_ctl restart -m fast` mid-run)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import psycopg_pool
import pytest

from hatp_mcp.errors import HatpError
from hatp_mcp.store.gateway_store import StoredAsk
from hatp_mcp.store.participant_state import BranchRow
from hatp_mcp.store.postgresql.pools import ATTEMPTS, open_async_pool, open_pool, run, run_async, where
from hatp_mcp.store.schema import Schema
from hatp_mcp.store.txn_log import LogEntry
from hatp_mcp.store.url import (
    StoreUrl,
    open_gateway_store,
    open_participant_store,
    open_replay_cache,
    open_txn_bindings,
    open_txn_log,
)
from tests.postgres_cluster import Cluster, running_cluster

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def _open_log(url: StoreUrl) -> None:
    async def run() -> None:
        async with open_txn_log(url):
            pass

    anyio.run(run)


OPENERS: dict[str, Callable[[StoreUrl], None]] = {
    "coordinator.log": _open_log,
    "participant.state": lambda url: open_participant_store(url).close(),
    "gateway": lambda url: open_gateway_store(url).close(),
    "replay": lambda url: open_replay_cache(url).close(),
    "coordinator.bindings": lambda url: open_txn_bindings(url).close(),
}


def _tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()]


@pytest.mark.parametrize("component", sorted(OPENERS))
def test_a_database_with_synchronous_commit_off_is_refused_under_HATP_STORE_3(pg_url: str, component: str) -> None:
    name = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    with pytest.raises(HatpError) as refused:
        OPENERS[component](StoreUrl("postgresql", pg_url))
    e = refused.value
    assert (e.rule, e.code, e.path) == ("HATP-STORE-3", "STORE_NOT_DURABLE", "synchronous_commit")
    assert "synchronous_commit off" in e.reason and "fsync and synchronous_commit on" in e.fix
    assert _tables(pg_url) == []  # refused before anything was created


def test_a_server_running_with_fsync_off_is_refused_under_HATP_STORE_3() -> None:
    with running_cluster(settings="-c fsync=off") as careless:
        url = careless.new_database()
        with pytest.raises(HatpError) as refused:
            open_participant_store(StoreUrl("postgresql", url))
        assert (refused.value.rule, refused.value.path) == ("HATP-STORE-3", "fsync")
        assert "(fsync off)" in refused.value.reason
        assert _tables(url) == []


def test_messages_name_the_database_never_its_password() -> None:
    assert where("postgresql://hatp:s3cret@db.internal:5433/hatp") == "postgresql://db.internal:5433/hatp"
    assert str(StoreUrl.parse("postgresql://hatp:s3cret@db.internal/hatp")) == "postgresql://db.internal/hatp"


def test_without_psycopg_a_postgresql_store_is_refused_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as on an install without the [postgresql] extra
    url = StoreUrl.parse("postgresql://hatp:s3cret@db.internal:5432/hatp")
    with pytest.raises(ValueError, match=r"pip install 'hatp-mcp\[postgresql\]'"):
        open_participant_store(url)
    assert str(url) == "postgresql://db.internal:5432/hatp"  # the message about it needs no psycopg


@pytest.mark.anyio
async def test_the_log_reconnects_after_a_fast_restart_mid_run_and_loses_nothing_it_acknowledged(
    postgres: Cluster, pg_url: str
) -> None:
    url = StoreUrl("postgresql", pg_url)
    acknowledged: dict[str, int] = {}  # txn -> how many events its appends returned for
    failed: list[str] = []
    restarted = anyio.Event()
    done_at_restart: list[int] = []
    per_txn = 30

    async with open_txn_log(url) as log:

        async def committed(txn: str) -> int:
            loaded = await log.load(txn)
            return len(loaded.events) if loaded else 0

        async def one(txn: str) -> None:
            acknowledged[txn] = 0
            while acknowledged[txn] < per_txn:
                seq = acknowledged[txn]
                first = [LogEntry("plan", {"txnId": txn})] if seq == 0 else []
                try:
                    await log.append(txn, [*first, LogEntry("event", {"seq": seq, "event": "vote"})])
                except (psycopg.OperationalError, psycopg_pool.PoolTimeout) as exc:
                    failed.append(type(exc).__name__)
                    # in flight when the server went away: committed whole or not at all; ask which
                    while True:
                        try:
                            if await committed(txn) == seq + 1:
                                acknowledged[txn] = seq + 1
                            break
                        except (psycopg.OperationalError, psycopg_pool.PoolTimeout):
                            failed.append("read")
                    continue
                acknowledged[txn] = seq + 1
                if sum(acknowledged.values()) >= 60 and not restarted.is_set():
                    restarted.set()

        async def restart() -> None:
            await restarted.wait()
            await anyio.to_thread.run_sync(postgres.restart, "fast")
            done_at_restart.append(sum(acknowledged.values()))

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(restart)
                for i in range(8):
                    tg.start_soon(one, f"t{i}")
        # the server restarted mid-run, and after it the same log kept going: every transaction reached its count
        assert len(done_at_restart) == 1 and done_at_restart[0] < 8 * per_txn, (done_at_restart, failed)
        assert acknowledged == {f"t{i}": per_txn for i in range(8)}
    async with open_txn_log(url) as again:  # and a fresh reader finds everything, in order, once
        for i in range(8):
            loaded = await again.load(f"t{i}")
            assert loaded is not None and [e["seq"] for e in loaded.events] == list(range(per_txn))


def test_the_synchronous_stores_reconnect_after_a_fast_restart(postgres: Cluster, pg_url: str) -> None:
    url = StoreUrl("postgresql", pg_url)
    participants, gateway, replay = open_participant_store(url), open_gateway_store(url), open_replay_cache(url)
    try:
        participants.put(BranchRow("t", "seat", "sha256:" + "0" * 64))
        gateway.create(StoredAsk("t/finance", "refused", None, {"decision": "no"}, None))
        assert replay.consume("s", "n1", approval_id="a", expires_at="2026-11-30T00:00:00Z", now=NOW)
        postgres.restart("fast")  # every pooled connection is dead now
        assert participants.get("t", "seat") == BranchRow("t", "seat", "sha256:" + "0" * 64)
        assert gateway.get("t/finance") == StoredAsk("t/finance", "refused", None, {"decision": "no"}, None)
        assert not replay.consume("s", "n1", approval_id="a", expires_at="2026-11-30T00:00:00Z", now=NOW)
        participants.put(BranchRow("t", "room", "sha256:" + "1" * 64))
        assert participants.get("t", "room") is not None
    finally:
        for store in (participants, gateway, replay):
            store.close()


@pytest.mark.anyio
async def test_an_append_whose_connection_is_ended_before_its_commit_is_written_again_on_a_new_one_once(
    pg_url: str,
) -> None:
    url = StoreUrl("postgresql", pg_url)
    async with open_txn_log(url) as log:
        await log.append("t", [LogEntry("plan", {"txnId": "t"}), LogEntry("event", {"seq": 0, "event": "txn.begin"})])
        blocker = psycopg.connect(pg_url)  # holds the events table: the next append waits, before its commit
        blocker.execute("LOCK TABLE txn_event IN ACCESS EXCLUSIVE MODE")
        outcome: list[BaseException | None] = []

        async def append() -> None:
            try:
                await log.append("t", [LogEntry("event", {"seq": 1, "event": "vote"})])
                outcome.append(None)
            except psycopg.OperationalError as exc:
                outcome.append(exc)

        def waiting() -> list[int]:
            with psycopg.connect(pg_url) as watch:
                rows = watch.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT%'"
                ).fetchall()
            return [int(r[0]) for r in rows]

        def end(pid: int) -> None:
            with psycopg.connect(pg_url) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(append)
                while not (first := await anyio.to_thread.run_sync(waiting)):
                    pass
                await anyio.to_thread.run_sync(end, first[0])  # as a restart would: the server ends the session
                while (again := await anyio.to_thread.run_sync(waiting)) in ([], first):
                    pass  # the append comes back on a new connection and waits again
                blocker.close()  # let it through
        assert outcome == [None]  # lost before its commit: nothing was kept, so it was written again
        assert again != first and log.batches == 2
        loaded = await log.load("t")
    assert loaded is not None and [e["seq"] for e in loaded.events] == [0, 1]  # once


class _Lost(psycopg.OperationalError):
    pass


class _Conn:
    """A connection whose commit can be made to fail, for `run`'s decision alone (the real loss is above)."""

    def __init__(self, commit_fails: bool) -> None:
        self.commit_fails = commit_fails

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield
        if self.commit_fails:
            raise _Lost("server closed the connection during COMMIT")


class _Pool:
    def __init__(self, commit_fails: bool = False) -> None:
        self.lent = 0
        self.checked = 0
        self.commit_fails = commit_fails

    def check(self) -> None:
        self.checked += 1

    @contextlib.contextmanager
    def connection(self) -> Iterator[_Conn]:
        self.lent += 1
        yield _Conn(self.commit_fails)


class _NoConnection:
    """A pool that lends no connection within its timeout (its server away all that time), sync and async."""

    def __init__(self) -> None:
        self.waits = 0
        self.checked = 0

    def _timeout(self) -> psycopg_pool.PoolTimeout:
        self.waits += 1
        return psycopg_pool.PoolTimeout("couldn't get a connection after 30.00 sec")

    def check(self) -> None:
        self.checked += 1

    @contextlib.contextmanager
    def connection(self) -> Iterator[_Conn]:
        raise self._timeout()
        yield _Conn(False)  # pragma: no cover - a generator that never lends


class _NoAsyncConnection(_NoConnection):
    async def check(self) -> None:  # type: ignore[override]
        self.checked += 1

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[_Conn]:  # type: ignore[override]
        raise self._timeout()
        yield _Conn(False)  # pragma: no cover - a generator that never lends


@pytest.mark.anyio
async def test_a_call_that_got_no_connection_within_the_pools_timeout_raises_and_waits_no_second_time() -> None:
    pool = _NoConnection()
    with pytest.raises(psycopg_pool.PoolTimeout):
        run(pool, lambda conn: "never", idempotent=False)  # type: ignore[arg-type]
    assert (pool.waits, pool.checked) == (1, 0)  # one wait of the pool's timeout, not ATTEMPTS of them

    async def never(conn: object) -> str:  # pragma: no cover - there is no connection to run it on
        return "never"

    apool = _NoAsyncConnection()
    with pytest.raises(psycopg_pool.PoolTimeout):
        await run_async(apool, never, idempotent=True)  # type: ignore[arg-type]
    assert (apool.waits, apool.checked) == (1, 0)


def test_a_connection_lost_during_the_commit_raises_at_once_and_is_never_tried_again() -> None:
    pool = _Pool(commit_fails=True)
    calls: list[int] = []
    with pytest.raises(_Lost):
        run(pool, lambda conn: calls.append(1), idempotent=False)  # type: ignore[arg-type]
    assert calls == [1] and pool.lent == 1  # the outcome is unknown: said so, not written twice


def test_a_connection_lost_before_the_commit_is_tried_again_up_to_the_bound() -> None:
    pool = _Pool()
    tries: list[int] = []

    def flaky(conn: object) -> str:
        tries.append(1)
        if len(tries) < ATTEMPTS:
            raise _Lost("terminating connection due to administrator command")
        return "written"

    assert run(pool, flaky, idempotent=False) == "written"  # type: ignore[arg-type]
    assert len(tries) == ATTEMPTS and pool.checked == ATTEMPTS - 1  # the idle connections checked between tries
    tries.clear()

    def gone(conn: object) -> str:
        tries.append(1)
        raise _Lost("the database system is shutting down")

    with pytest.raises(_Lost):
        run(pool, gone, idempotent=True)  # type: ignore[arg-type]
    assert len(tries) == ATTEMPTS  # bounded: then the caller is told


@pytest.mark.anyio
async def test_what_was_acknowledged_survives_postgresql_crashing(postgres: Cluster, pg_url: str) -> None:
    url = StoreUrl("postgresql", pg_url)
    async with open_txn_log(url) as log:
        await log.append("t", [LogEntry("plan", {"txnId": "t"}), LogEntry("decision", {"decision": "commit"})])
        await anyio.to_thread.run_sync(postgres.restart, "immediate")  # no shutdown checkpoint: recovery from WAL
        loaded = await log.load("t")  # the same log, reconnected after the crash
    assert loaded is not None and loaded.decision == "commit"


_PROBE = Schema("test.pools", (("CREATE TABLE probe (n INTEGER)",),))
_AWAY_TRIES = 10  # failed connection tries of each pool before the server comes back (psycopg_pool's own back-off
# alone has waited about 16 s by then, and would next try about as late again)


def _failed_tries(pool: psycopg_pool.ConnectionPool[Any] | psycopg_pool.AsyncConnectionPool[Any]) -> int:
    return int(pool.get_stats().get("connections_errors", 0))


@pytest.mark.anyio
async def test_pools_serve_the_calls_that_waited_for_their_server_within_seconds_of_its_return() -> None:
    """spec/store.md section 2: a store reconnects on its next call, waiting for the server: the call is answered
    once the server is back, not whenever the pool's lengthening pauses between tries happen to end."""
    with running_cluster() as cluster:
        url = cluster.new_database()
        pool = open_pool(url, _PROBE)
        apool = await open_async_pool(url, _PROBE)
        answered: dict[str, float] = {}

        def one(conn: psycopg.Connection[Any]) -> object:
            return conn.execute("SELECT 1").fetchone()

        async def one_async(conn: psycopg.AsyncConnection[Any]) -> object:
            return await (await conn.execute("SELECT 1")).fetchone()

        async def call() -> None:
            assert await anyio.to_thread.run_sync(lambda: run(pool, one, idempotent=True)) == (1,)
            answered["sync"] = time.monotonic()

        async def call_async() -> None:
            assert await run_async(apool, one_async, idempotent=True) == (1,)
            answered["async"] = time.monotonic()

        try:
            await anyio.to_thread.run_sync(cluster.stop)
            with anyio.fail_after(90):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    tg.start_soon(call_async)
                    while min(_failed_tries(pool), _failed_tries(apool)) < _AWAY_TRIES:  # noqa: ASYNC110
                        await anyio.sleep(0.05)  # the pools' own threads and tasks count them; nothing signals it
                    await anyio.to_thread.run_sync(cluster.start_again)
                    back = time.monotonic()
        finally:
            pool.close()
            await apool.close()
    late = {kind: round(at - back, 1) for kind, at in answered.items()}
    assert set(late) == {"sync", "async"} and max(late.values()) < 8, late  # a try every second or two, not ~15 s on

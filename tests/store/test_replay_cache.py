"""The gate's durable state: a nonce is spent once, also across restarts (HATP-GATE-18), and a tool definition's
epoch moves only when the definition changes (HATP-GATE-9)."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from hatp_mcp.store.replay_cache import WAL_PAGES, ReplayCache, SqliteReplayCache
from hatp_mcp.store.sqlite import open_db
from hatp_mcp.store.url import open_replay_cache
from tests.store.conftest import Backend

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SERVER = "mcp://payments.example"


def spend(cache: ReplayCache, nonce: str = "nonce-0123456789abcdef", server: str = SERVER) -> bool:
    return cache.consume(server, nonce, approval_id="a1", expires_at="2026-11-29T10:15:00Z", now=NOW)


def test_a_nonce_is_spent_once_and_a_replay_is_refused_after_a_restart_under_HATP_GATE_18(backend: Backend) -> None:
    cache = open_replay_cache(backend.url("gate"))
    assert not cache.seen(SERVER, "nonce-0123456789abcdef")
    assert spend(cache) is True
    assert spend(cache) is False
    cache.close()
    reopened = open_replay_cache(backend.url("gate"))
    assert reopened.seen(SERVER, "nonce-0123456789abcdef")
    assert spend(reopened) is False
    assert spend(reopened, server="mcp://other.example") is True  # nonces are per server
    reopened.close()


def test_concurrent_spends_of_one_nonce_let_exactly_one_through(backend: Backend) -> None:
    caches = [open_replay_cache(backend.url("gate")) for _ in range(4)]
    results: list[bool] = []
    threads = [threading.Thread(target=lambda c=c: results.append(spend(c))) for c in caches for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results) == [False] * 15 + [True]
    for c in caches:
        c.close()


def test_purging_forgets_only_nonces_of_long_expired_approvals(backend: Backend) -> None:
    cache = open_replay_cache(backend.url("gate"))
    spend(cache, "nonce-expires-soon-000")
    cache.consume(SERVER, "nonce-expires-later-00", approval_id="a2", expires_at="2026-12-05T00:00:00Z", now=NOW)
    assert cache.purge(NOW + timedelta(days=2)) == 1
    assert not cache.seen(SERVER, "nonce-expires-soon-000")
    assert cache.seen(SERVER, "nonce-expires-later-00")
    cache.close()


def test_a_tool_definition_epoch_moves_only_when_the_definition_changes_under_HATP_GATE_9(backend: Backend) -> None:
    cache = open_replay_cache(backend.url("gate"))
    assert cache.note_definition(SERVER, "charge_card", "sha256:" + "a" * 64, NOW) == NOW
    later = NOW + timedelta(hours=1)
    assert cache.note_definition(SERVER, "charge_card", "sha256:" + "a" * 64, later) == NOW
    assert cache.note_definition(SERVER, "charge_card", "sha256:" + "b" * 64, later) == later
    back = later + timedelta(hours=1)
    assert cache.note_definition(SERVER, "charge_card", "sha256:" + "a" * 64, back) == back  # a flip back is new
    cache.close()
    reopened = open_replay_cache(backend.url("gate"))
    assert reopened.note_definition(SERVER, "charge_card", "sha256:" + "a" * 64, back + timedelta(hours=1)) == back
    reopened.close()


def test_several_keys_are_spent_all_or_none_under_HATP_GATE_18(backend: Backend) -> None:
    cache = backend.closing(open_replay_cache(backend.url("gate")))
    args = {"approval_id": "a1", "expires_at": "2026-11-29T10:15:00Z", "now": NOW}
    assert not cache.seen_any(SERVER, ["approval-1", "proof-bob"])
    assert cache.consume_all(SERVER, ["approval-1", "proof-bob", "proof-bob"], **args) is True  # a key named twice
    assert cache.seen_any(SERVER, ["nobody", "proof-bob"])
    # one key spent before: nothing of this call is spent
    assert cache.consume_all(SERVER, ["approval-2", "proof-bob"], **args) is False
    assert not cache.seen_any(SERVER, ["approval-2"])
    assert cache.consume_all("mcp://other.example", ["approval-1"], **args) is True  # per server


def test_concurrent_spends_of_overlapping_keys_let_exactly_one_through(backend: Backend) -> None:
    caches = [backend.closing(open_replay_cache(backend.url("gate"))) for _ in range(4)]
    results: list[bool] = []
    args = {"approval_id": "a1", "expires_at": "2026-11-29T10:15:00Z", "now": NOW}

    def spend_all(c: ReplayCache, i: int) -> None:
        results.append(c.consume_all(SERVER, [f"approval-{i}", "proof-shared"], **args))  # type: ignore[arg-type]

    threads = [threading.Thread(target=spend_all, args=(c, i)) for i, c in enumerate(caches) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results) == [False] * 7 + [True]


def test_an_unchanged_tool_definition_is_read_without_waiting_for_another_writer_under_HATP_GATE_9(
    tmp_path: Path,
) -> None:
    """Every gated call notes its tool's definition; while it is unchanged that is a plain read, which in WAL waits
    for no writer (another process holding the write lock through its fsync). A change still takes the lock."""
    db = tmp_path / "gate.db"
    cache = SqliteReplayCache(db)
    digest = "sha256:" + "a" * 64
    assert cache.note_definition(SERVER, "charge_card", digest, NOW) == NOW
    other = open_db(db)  # another process's connection, in the middle of its own write
    other.execute("BEGIN IMMEDIATE")
    got: list[datetime] = []
    reader = threading.Thread(
        target=lambda: got.append(cache.note_definition(SERVER, "charge_card", digest, NOW + timedelta(hours=1)))
    )
    try:
        reader.start()
        reader.join(timeout=10)  # bounded: a read that waited for the lock would wait out busy_timeout (30 s)
        assert got == [NOW]
    finally:
        other.execute("ROLLBACK")
        reader.join(timeout=60)
        other.close()
    changed = NOW + timedelta(hours=2)
    assert cache.note_definition(SERVER, "charge_card", "sha256:" + "b" * 64, changed) == changed
    cache.close()


def test_the_log_is_grown_once_at_open_so_no_spend_grows_it_and_every_spend_stays_committed(tmp_path: Path) -> None:
    """A spend on a growing write-ahead log must make the file's new size durable too (a second device flush): the
    cache grows its log to the checkpoint threshold when it opens, and the log then keeps its size. Each spend is
    still committed before it returns (another connection sees it), across a reopen too, and the scratch table the
    log was grown with is gone."""
    path = tmp_path / "gate.db"
    cache = SqliteReplayCache(path)
    wal = Path(f"{path}-wal")
    other = open_db(path)
    page = other.execute("PRAGMA page_size").fetchone()[0]
    size = wal.stat().st_size
    assert size >= page * WAL_PAGES
    for i in range(150):  # past one checkpoint: the log is written again from its start
        keys = [f"nonce-{i:020d}", f"approval:a{i}", f"proof:{i:020d}"]
        assert cache.consume_all(SERVER, keys, approval_id=f"a{i}", expires_at="2026-11-29T10:15:00Z", now=NOW)
        assert other.execute("SELECT count(*) FROM used_nonce WHERE approval_id = ?", (f"a{i}",)).fetchone()[0] == 3
    assert wal.stat().st_size == size
    other.close()
    cache.close()
    again = SqliteReplayCache(path)
    assert again.seen(SERVER, "nonce-00000000000000000149") and not again.consume_all(
        SERVER, ["approval:a7"], approval_id="x", expires_at="2026-11-29T10:15:00Z", now=NOW
    )
    look = open_db(path)
    assert ("wal_presize",) not in look.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    look.close()
    again.close()


def test_HATP_GATE_27_the_nonce_spend_is_committed_fsynced_before_the_tool_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hatp_mcp.store import replay_cache
    from tests.store.conftest import SyncLevels

    levels = SyncLevels(monkeypatch, replay_cache)
    cache = SqliteReplayCache(tmp_path / "forced.db")
    try:
        levels.clear()
        assert spend(cache, "nonce-forced-0123456789")
        assert not spend(cache, "nonce-forced-0123456789")  # a replay: refused, and nothing written unforced
        assert levels.commits() and set(levels.commits()) == {"FULL"}
    finally:
        cache.close()


def test_HATP_GATE_27_a_nonce_store_whose_commits_would_not_be_fsynced_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hatp_mcp.errors import HatpError
    from hatp_mcp.store import replay_cache

    def unforced(path: object, **kwargs: object) -> sqlite3.Connection:
        conn = open_db(str(path))
        conn.execute("PRAGMA synchronous=NORMAL")  # the planted violation: spends written, not fsynced
        return conn

    monkeypatch.setattr(replay_cache, "open_db", unforced)
    with pytest.raises(HatpError) as info:
        SqliteReplayCache(tmp_path / "unforced.db")
    assert (info.value.rule, info.value.code, info.value.path) == (
        "HATP-GATE-27",
        "STORE_NOT_DURABLE",
        "PRAGMA synchronous",
    )

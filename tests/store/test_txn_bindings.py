"""The txnId -> coordinator bindings a receiver keeps (spec/mcp-binding.md HATP-TRUST-5), on both backends:
written once, the first binding holds, it survives a restart, and two stores on one database agree on one winner,
also when they race."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from hatp_mcp.core.participant.coordinator_auth import Binding
from hatp_mcp.store.txn_bindings import MemoryTxnBindings, SqliteTxnBindings, TxnBindings
from hatp_mcp.store.url import open_txn_bindings
from tests.store.conftest import Backend

A = Binding("txn-1", "coordinator://a", "sha256:" + "a" * 64)
B = Binding("txn-1", "coordinator://b", "sha256:" + "b" * 64)


def test_HATP_TRUST_5_the_first_binding_holds_and_a_second_never_replaces_it(backend: Backend) -> None:
    stores: list[TxnBindings] = [MemoryTxnBindings(), backend.closing(open_txn_bindings(backend.url("coordinators")))]
    for store in stores:
        assert store.get("txn-1") is None
        assert store.bind(A) == A
        assert store.bind(B) == A  # the caller sees who holds it, and refuses
        assert store.get("txn-1") == A


def test_a_binding_survives_a_restart_and_two_processes_on_one_store_see_one_winner(backend: Backend) -> None:
    first = open_txn_bindings(backend.url("coordinators"))
    second = open_txn_bindings(backend.url("coordinators"))
    assert first.bind(A) == A
    assert second.bind(B) == A
    first.close()
    second.close()
    again = backend.closing(open_txn_bindings(backend.url("coordinators")))
    assert again.get("txn-1") == A


def test_racing_binders_of_one_txn_id_all_read_the_one_that_won(backend: Backend) -> None:
    stores = [backend.closing(open_txn_bindings(backend.url("coordinators"))) for _ in range(4)]
    seen: list[Binding] = []
    claims = [Binding("txn-race", f"coordinator://{i}", "sha256:" + str(i) * 64) for i in range(8)]
    threads = [
        threading.Thread(target=lambda s=s, c=c: seen.append(s.bind(c)))
        for s, c in zip(stores * 2, claims, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(seen) == 8 and len(set(seen)) == 1 and seen[0] in claims


def test_HATP_TRUST_9_the_highest_epoch_is_only_ever_raised_and_survives_a_restart(backend: Backend) -> None:
    stores: list[TxnBindings] = [MemoryTxnBindings(), backend.closing(open_txn_bindings(backend.url("epochs")))]
    for store in stores:
        assert store.advance("txn-1", 0) == 0
        assert store.advance("txn-1", 2) == 2
        assert store.advance("txn-1", 1) == 2  # a lower epoch never lowers it: the caller sees 2 and refuses
        assert store.advance("txn-2", 1) == 1  # per transaction
    again = backend.closing(open_txn_bindings(backend.url("epochs")))
    assert again.advance("txn-1", 1) == 2


def test_an_epoch_that_raises_nothing_writes_nothing(tmp_path: Path) -> None:
    """HATP-TRUST-9 keeps the highest epoch durable; a request at or below it (every request of a coordinator that
    holds no lease is at epoch 0) changes nothing, so it costs no durable write (another connection sees the
    database unchanged), and the highest still holds after a restart."""
    path = tmp_path / "coordinators.db"
    store = SqliteTxnBindings(path)
    watcher = sqlite3.connect(path)

    def version() -> int:
        return int(watcher.execute("PRAGMA data_version").fetchone()[0])

    before = version()
    assert store.advance("txn-1", 0) == 0  # no row is epoch 0
    assert version() == before
    assert store.advance("txn-1", 2) == 2
    raised = version()
    assert raised != before
    assert store.advance("txn-1", 2) == 2
    assert store.advance("txn-1", 1) == 2
    assert version() == raised
    store.close()
    again = SqliteTxnBindings(path)
    assert again.advance("txn-1", 0) == 2
    again.close()
    watcher.close()

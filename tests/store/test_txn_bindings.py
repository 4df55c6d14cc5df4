"""The txnId -> coordinator bindings a receiver keeps (spec/mcp-binding.md HATP-TRUST-5), on both backends:
written once, the first binding holds, it survives a restart, and two stores on one database agree on one winner,
also when they race."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from hatp_mcp.core.participant.coordinator_auth import Binding
from hatp_mcp.errors import HatpError
from hatp_mcp.store.participant_state import SQLITE_SCHEMA as PARTICIPANT_SCHEMA
from hatp_mcp.store.participant_state import BranchRow, SqliteParticipantStore, StateDb
from hatp_mcp.store.schema import Schema, migrate_sqlite
from hatp_mcp.store.sqlite import open_db
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


def deferred_pair(path: Path) -> tuple[StateDb, SqliteParticipantStore, SqliteTxnBindings]:
    db = StateDb(path)
    return db, SqliteParticipantStore(db), SqliteTxnBindings(db, defer=True)


def test_HATP_TRUST_5_a_deferred_binding_is_seen_at_once_and_made_durable_by_the_txn_ids_next_put(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    db, store, bindings = deferred_pair(path)
    watcher = SqliteTxnBindings(StateDb(path))  # another connection: sees only what is durable
    assert bindings.bind(A) == A and bindings.bind(B) == A  # held at once: the second coordinator loses
    assert bindings.advance("txn-1", 2) == 2 and bindings.advance("txn-1", 1) == 2
    assert watcher.get("txn-1") is None  # not written yet
    store.put(BranchRow("txn-2", "seat", A.plan_digest))  # another txnId's put carries nothing of txn-1
    assert watcher.get("txn-1") is None
    store.put(BranchRow("txn-1", "seat", A.plan_digest))  # one transaction: the row, the binding, the epoch
    assert watcher.get("txn-1") == A and watcher.advance("txn-1", 0) == 2
    assert not db.deferred("txn-1")
    db.close()
    again = SqliteTxnBindings(StateDb(path))
    assert again.get("txn-1") == A and again.advance("txn-1", 0) == 2


def test_HATP_TRUST_5_a_deferred_binding_rolled_back_with_its_transaction_waits_and_is_settled_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    db, store, bindings = deferred_pair(path)
    watcher = SqliteTxnBindings(StateDb(path))
    bindings.bind(A)
    with pytest.raises(RuntimeError), store.transaction():
        store.put(BranchRow("txn-1", "seat", A.plan_digest))
        raise RuntimeError("the hold failed")
    assert watcher.get("txn-1") is None and bindings.get("txn-1") == A  # rolled back, still deferred
    assert store.get("txn-1", "seat") is None
    bindings.settle("txn-1")  # before the answer: written alone
    assert watcher.get("txn-1") == A and not db.deferred("txn-1")
    other = sqlite3.connect(path)  # PRAGMA data_version moves when another connection commits
    version = int(other.execute("PRAGMA data_version").fetchone()[0])
    bindings.settle("txn-1")  # nothing deferred: nothing written
    assert int(other.execute("PRAGMA data_version").fetchone()[0]) == version
    store.put(BranchRow("txn-1", "seat", A.plan_digest))  # the check can see a write
    assert int(other.execute("PRAGMA data_version").fetchone()[0]) != version
    other.close()


def test_HATP_TRUST_5_a_deferred_binding_that_another_process_beat_refuses_and_keeps_nothing(tmp_path: Path) -> None:
    """Two processes on one state.db: the second's deferred binding meets the first's durable one inside its put's
    transaction, which is refused (TXN_BOUND) and rolled back: its row is not kept."""
    path = tmp_path / "state.db"
    _db, store, bindings = deferred_pair(path)
    first = SqliteTxnBindings(StateDb(path))  # eager, as on a file of its own
    assert bindings.bind(B) == B  # deferred: not yet durable
    assert first.bind(A) == A  # the other process wins durably
    with pytest.raises(HatpError) as err:
        store.put(BranchRow("txn-1", "seat", B.plan_digest))
    assert (err.value.rule, err.value.code) == ("HATP-TRUST-5", "TXN_BOUND")
    assert store.get("txn-1", "seat") is None and first.get("txn-1") == A


def test_HATP_STORE_1_a_state_db_holding_its_bindings_is_refused_by_code_that_kept_them_apart(tmp_path: Path) -> None:
    """participant.state version 2 holds the bindings: the code before it (version 1) refuses the file instead of
    running on an empty coordinators.db."""
    path = tmp_path / "state.db"
    SqliteParticipantStore(path).close()
    before = Schema(PARTICIPANT_SCHEMA.component, PARTICIPANT_SCHEMA.steps[:1])
    conn = open_db(path)
    with pytest.raises(HatpError) as err:
        migrate_sqlite(conn, before, str(path))
    conn.close()
    assert (err.value.rule, err.value.code, err.value.path) == (
        "HATP-STORE-1",
        "SCHEMA_TOO_NEW",
        "hatp_schema.participant.state",
    )

"""A participant's branch state survives the process (SQLite and PostgreSQL) and in memory is kept as copies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hatp_mcp.core.participant.branch import BranchState, Lease
from hatp_mcp.store.participant_state import BranchRow, MemoryParticipantStore
from hatp_mcp.store.url import open_participant_store
from tests.store.conftest import Backend

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def row() -> BranchRow:
    return BranchRow(
        "txn-1",
        "seat",
        "sha256:" + "0" * 64,
        BranchState.PREPARED.value,
        {"branchId": "seat"},
        Lease(NOW + timedelta(seconds=300), NOW + timedelta(hours=4)),
        {"versions": {"seat:inventory": "1"}},
        None,
        {"prepare": {"vote": {"decision": "yes"}}},
    )


def test_a_branch_row_and_a_lock_survive_reopening_the_store(backend: Backend) -> None:
    store = open_participant_store(backend.url("p"))
    store.put(row())
    store.put_lock("seat-14C", {"owner": "txn-1", "token": 3, "expiresAt": NOW, "released": False})
    store.close()
    again = open_participant_store(backend.url("p"))
    assert again.get("txn-1", "seat") == row()
    assert again.get_lock("seat-14C") == {"owner": "txn-1", "token": 3, "expiresAt": NOW, "released": False}
    assert again.get("txn-1", "room") is None and again.get_lock("room-7") is None
    again.close()


def test_the_memory_store_hands_out_copies() -> None:
    store = MemoryParticipantStore()
    store.put(row())
    got = store.get("txn-1", "seat")
    assert got is not None
    got.answers["commit"] = {"receipt": {}}
    got.state = BranchState.COMMITTED.value
    assert store.get("txn-1", "seat") == row()


def test_a_row_whose_branch_holds_an_integer_beyond_64_bits_survives_exactly(backend: Backend) -> None:
    big = row()
    big.branch = {"branchId": "seat", "args": {"n": 2**70, "name": "é"}}
    store = open_participant_store(backend.url("p"))
    store.put(big)
    assert store.get("txn-1", "seat") == big  # neither truncated nor turned into a float
    store.close()


def test_a_put_replaces_the_row_and_each_lock_keeps_its_latest_state(backend: Backend) -> None:
    store = open_participant_store(backend.url("p"))
    store.put(row())
    committed = row()
    committed.state = BranchState.COMMITTED.value
    committed.answers = {**committed.answers, "commit": {"receipt": {"n": 1}}}
    store.put(committed)
    store.put_lock("seat-14C", {"owner": "txn-1", "token": 3, "expiresAt": NOW, "released": False})
    store.put_lock("seat-14C", {"owner": "txn-2", "token": 4, "expiresAt": NOW, "released": False})
    assert store.get("txn-1", "seat") == committed
    assert store.get_lock("seat-14C") == {"owner": "txn-2", "token": 4, "expiresAt": NOW, "released": False}
    store.close()

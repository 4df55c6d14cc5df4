"""A participant's branch state survives the process (SQLite) and in memory is kept as copies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from hatp_mcp.core.participant.branch import BranchState, Lease
from hatp_mcp.store.participant_state import BranchRow, MemoryParticipantStore, SqliteParticipantStore

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


def test_a_branch_row_and_a_lock_survive_reopening_the_sqlite_store(tmp_path: Path) -> None:
    store = SqliteParticipantStore(tmp_path / "p.db")
    store.put(row())
    store.put_lock("seat-14C", {"owner": "txn-1", "token": 3, "expiresAt": NOW, "released": False})
    store.close()
    again = SqliteParticipantStore(tmp_path / "p.db")
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


def test_a_row_whose_branch_holds_an_integer_beyond_64_bits_survives_exactly(tmp_path: Path) -> None:
    big = row()
    big.branch = {"branchId": "seat", "args": {"n": 2**70, "name": "é"}}
    store = SqliteParticipantStore(tmp_path / "p.db")
    store.put(big)
    assert store.get("txn-1", "seat") == big  # neither truncated nor turned into a float
    store.close()

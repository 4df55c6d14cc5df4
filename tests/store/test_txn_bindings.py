"""The txnId -> coordinator bindings a receiver keeps (spec/mcp-binding.md HATP-TRUST-5): written once, the first
binding holds, it survives a restart, and two stores on one file agree on one winner."""

from __future__ import annotations

from pathlib import Path

from hatp_mcp.core.participant.coordinator_auth import Binding
from hatp_mcp.store.txn_bindings import MemoryTxnBindings, SqliteTxnBindings

A = Binding("txn-1", "coordinator://a", "sha256:" + "a" * 64)
B = Binding("txn-1", "coordinator://b", "sha256:" + "b" * 64)


def test_HATP_TRUST_5_the_first_binding_holds_and_a_second_never_replaces_it(tmp_path: Path) -> None:
    for store in (MemoryTxnBindings(), SqliteTxnBindings(tmp_path / "coordinators.db")):
        assert store.get("txn-1") is None
        assert store.bind(A) == A
        assert store.bind(B) == A  # the caller sees who holds it, and refuses
        assert store.get("txn-1") == A


def test_a_binding_survives_a_restart_and_two_processes_on_one_file_see_one_winner(tmp_path: Path) -> None:
    first, second = SqliteTxnBindings(tmp_path / "c.db"), SqliteTxnBindings(tmp_path / "c.db")
    assert first.bind(A) == A
    assert second.bind(B) == A
    first.close()
    second.close()
    again = SqliteTxnBindings(tmp_path / "c.db")
    assert again.get("txn-1") == A
    again.close()

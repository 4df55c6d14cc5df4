"""The inbox's durable state: a challenge is taken once (HATP-GW-67), expires, and expired ones are purged so that
anyone asking for sign-in challenges cannot pile them up; sign counts only move forward (HATP-GW-69)."""

from __future__ import annotations

from pathlib import Path

from hatp_mcp.store.inbox_state import InboxState


def test_HATP_GW_67_a_challenge_is_taken_once_for_its_purpose_and_not_after_it_expired(tmp_path: Path) -> None:
    state = InboxState(tmp_path)
    state.keep_challenge("n1", "decide", "bob", {"x": 1}, "2026-11-29T10:05:00Z")
    state.keep_challenge("n2", "decide", "bob", {"x": 2}, "2026-11-29T10:05:00Z")
    state.keep_challenge("n3", "signin", None, {"x": 3}, "2026-11-29T10:05:00Z")
    assert state.take_challenge("n1", "decide", "2026-11-29T10:01:00Z") == ("bob", {"x": 1})
    assert state.take_challenge("n1", "decide", "2026-11-29T10:01:00Z") is None  # single use
    assert state.take_challenge("n3", "decide", "2026-11-29T10:01:00Z") is None  # another purpose: and spent
    assert state.take_challenge("n2", "decide", "2026-11-29T10:06:00Z") is None  # expired
    state.close()


def test_expired_challenges_are_purged_when_a_new_one_is_kept_and_counters_never_go_back(tmp_path: Path) -> None:
    state = InboxState(tmp_path)
    for i in range(50):
        state.keep_challenge(f"old{i}", "signin", None, {}, "2026-11-29T10:05:00Z")
    state.keep_challenge("new", "signin", None, {}, "2026-11-29T10:20:00Z", now="2026-11-29T10:10:00Z")
    rows = state._conn.execute("SELECT COUNT(*) FROM challenges").fetchone()[0]
    assert rows == 1
    state.set_sign_count("cred", 7)
    state.set_sign_count("cred", 3)
    assert state.sign_count("cred") == 7
    state.close()


def test_HATP_GW_86_an_inbox_db_kept_before_enrolments_recorded_their_authority_opens_and_says_so(
    tmp_path: Path,
) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "inbox.db") as db:  # the table as it was before authorized_by
        db.execute(
            "CREATE TABLE enrolments (seq INTEGER PRIMARY KEY AUTOINCREMENT, human TEXT NOT NULL, credential_id TEXT"
            " NOT NULL UNIQUE, public_key TEXT NOT NULL, registered_at TEXT NOT NULL, state TEXT NOT NULL)"
        )
        db.execute(
            "INSERT INTO enrolments VALUES (1, 'human://acme.com/bob', 'old', 'pk', '2026-01-01T00:00:00Z', 'pending')"
        )
    state = InboxState(tmp_path)
    try:
        state.register(None, "human://acme.com/bob", "new", "pk", "2026-01-02T00:00:00Z", "passkey old")
        kept = [(e.credential_id, e.authorized_by) for e in state.enrolments()]
    finally:
        state.close()
    assert kept == [("old", "unrecorded"), ("new", "passkey old")]

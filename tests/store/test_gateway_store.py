"""The gateway store: asks survive reopening, updates are atomic, contacts stay in their own table."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from hatp_mcp.core.gateway import open_approval
from hatp_mcp.store.gateway_store import GatewayStore, StoredAsk
from tests.acme_org import GATEWAY_ID, directory, plan

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def stored() -> StoredAsk:
    rec = open_approval(plan(), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    return StoredAsk(rec.ask.ask_id, rec.state, rec, {"type": "hatp.vote", "decision": "pending"}, None)


def test_an_ask_written_is_read_back_after_reopening_the_database_under_HATP_GW_13(tmp_path: Path) -> None:
    s = GatewayStore(tmp_path)
    first = stored()
    s.create(first, "txn-acme-0001", "finance")
    s.close()
    again = GatewayStore(tmp_path)
    got = again.get(first.ask_id)
    assert got == first
    assert [a.ask_id for a in again.asks("pending")] == [first.ask_id]


def test_creating_the_same_ask_twice_keeps_the_first(tmp_path: Path) -> None:
    s = GatewayStore(tmp_path)
    first = stored()
    s.create(first)
    other = StoredAsk(first.ask_id, "pending", first.record, {"type": "hatp.vote", "decision": "no"}, None)
    assert s.create(other) == first


def test_a_failing_update_leaves_the_stored_ask_unchanged(tmp_path: Path) -> None:
    s = GatewayStore(tmp_path)
    first = s.create(stored())

    def boom(_a: StoredAsk) -> StoredAsk:
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        s.update(first.ask_id, boom)
    assert s.get(first.ask_id) == first
    with pytest.raises(KeyError):
        s.update("no/such", lambda a: a)


def test_contacts_and_the_outbox_are_kept_apart(tmp_path: Path) -> None:
    s = GatewayStore(tmp_path)
    s.set_contact("human://acme.com/frank", "sms", "+49-555-0199-frank")
    s.record_sent("a/b", "vote", {"decision": "pending"}, recipient=None)
    assert s.contacts_for("human://acme.com/frank") == {"sms": "+49-555-0199-frank"}
    assert s.sent() == [("a/b", "vote", None, {"decision": "pending"})]

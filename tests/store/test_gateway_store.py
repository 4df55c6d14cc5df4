"""The gateway store on both backends: asks survive reopening, updates are atomic, contacts stay in their own
table, a timer step is recorded once (HATP-GW-76)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hatp_mcp.core.gateway.machine import open_approval
from hatp_mcp.errors import HatpError
from hatp_mcp.store.gateway_store import Sent, StoredAsk, TimerStep, Write
from hatp_mcp.store.url import open_gateway_store
from tests.acme_org import GATEWAY_ID, directory, plan
from tests.store.conftest import Backend

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def stored() -> StoredAsk:
    rec = open_approval(plan(), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    return StoredAsk(rec.ask.ask_id, rec.state, rec, {"type": "hatp.vote", "decision": "pending"}, None)


def test_an_ask_written_is_read_back_after_reopening_the_database_under_HATP_GW_13(backend: Backend) -> None:
    s = open_gateway_store(backend.url("gateway"))
    first = stored()
    s.create(first, "txn-acme-0001", "finance")
    s.close()
    again = open_gateway_store(backend.url("gateway"))
    got = again.get(first.ask_id)
    assert got == first
    assert [a.ask_id for a in again.asks("pending")] == [first.ask_id]


def test_creating_the_same_ask_twice_keeps_the_first(backend: Backend) -> None:
    s = open_gateway_store(backend.url("gateway"))
    first = stored()
    s.create(first)
    other = StoredAsk(first.ask_id, "pending", first.record, {"type": "hatp.vote", "decision": "no"}, None)
    assert s.create(other) == first


def test_a_failing_update_leaves_the_stored_ask_unchanged(backend: Backend) -> None:
    s = open_gateway_store(backend.url("gateway"))
    first = s.create(stored())

    def boom(_a: StoredAsk) -> StoredAsk:
        raise RuntimeError("refused")

    with pytest.raises(RuntimeError):
        s.update(first.ask_id, boom)
    assert s.get(first.ask_id) == first
    with pytest.raises(KeyError):
        s.update("no/such", lambda a: a)


def test_contacts_and_the_outbox_are_kept_apart(backend: Backend) -> None:
    s = open_gateway_store(backend.url("gateway"))
    s.set_contact("human://acme.com/frank", "sms", "+49-555-0199-frank")
    s.record_sent("a/b", "vote", {"decision": "pending"}, recipient=None)
    assert s.contacts_for("human://acme.com/frank") == {"sms": "+49-555-0199-frank"}
    assert s.sent() == [("a/b", "vote", None, {"decision": "pending"})]


def test_a_nonce_is_spent_with_the_change_and_a_refused_change_spends_nothing(backend: Backend) -> None:
    store = open_gateway_store(backend.url("gateway"))
    rec = open_approval(plan(), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    store.create(StoredAsk(rec.ask.ask_id, rec.state, rec, None, None))
    seen: list[bool] = []

    def refuse(s: StoredAsk, used: bool) -> StoredAsk:
        seen.append(used)
        raise ValueError("refused")

    with pytest.raises(ValueError):
        store.update_spending(rec.ask.ask_id, "nonce-aaaaaaaaaaaaaaaa", refuse)
    store.update_spending(rec.ask.ask_id, "nonce-aaaaaaaaaaaaaaaa", lambda s, used: seen.append(used) or s)
    store.close()
    reopened = open_gateway_store(backend.url("gateway"))
    reopened.update_spending(rec.ask.ask_id, "nonce-bbbbbbbbbbbbbbbb", lambda s, used: seen.append(used) or s)
    with pytest.raises(ValueError):
        reopened.update_spending(rec.ask.ask_id, "nonce-aaaaaaaaaaaaaaaa", refuse)
    assert seen == [False, False, False, True]  # spent once, and still spent after reopening


def test_proofs_left_in_the_store_are_kept_in_order_and_settled_once(backend: Backend) -> None:
    store = open_gateway_store(backend.url("gateway"))
    first = store.submit_proof("a/1", {"human": "x"})
    second = store.submit_proof("a/1", {"human": "y"})
    store.submit_proof("b/1", {"human": "z"})
    store.settle_proof(first, "refused", "HATP-GW-21", "forged")
    assert [(p.seq, p.proof["human"]) for p in store.proofs("a/1", "submitted")] == [(second, "y")]
    assert [(p.status, p.rule) for p in store.proofs("a/1")] == [("refused", "HATP-GW-21"), ("submitted", None)]
    assert len(store.proofs()) == 3


def test_the_asks_with_submitted_proofs_are_listed_once_each_in_the_order_their_proofs_were_left(
    backend: Backend,
) -> None:
    store = open_gateway_store(backend.url("gateway"))
    first = store.submit_proof("b/1", {"human": "x"})
    store.submit_proof("a/1", {"human": "y"})
    store.submit_proof("b/1", {"human": "z"})
    assert store.asks_with_proofs("submitted") == ["b/1", "a/1"]
    store.settle_proof(first, "accepted")
    assert store.asks_with_proofs("submitted") == ["a/1", "b/1"]
    assert store.asks_with_proofs("accepted") == ["b/1"]


def test_HATP_GW_76_a_timer_step_is_recorded_once_and_a_write_taking_it_again_keeps_nothing(
    backend: Backend,
) -> None:
    a, b = open_gateway_store(backend.url("gateway")), open_gateway_store(backend.url("gateway"))  # two processes
    first = a.create(stored())
    step = TimerStep(first.ask_id, "sla human://acme.com/frank", "2026-11-29T12:00:00Z", "gw-a", "2026-11-29T12:01:00Z")
    moved = StoredAsk(first.ask_id, first.state, first.record, {"type": "hatp.vote", "decision": "moved"}, None)
    a.write(first.ask_id, lambda s: Write(moved, (Sent("vote", {"decision": "moved"}),), (step,)))
    again = TimerStep(step.ask_id, step.timer, step.due_at, "gw-b", "2026-11-29T12:01:01Z")
    late = StoredAsk(first.ask_id, first.state, first.record, {"type": "hatp.vote", "decision": "twice"}, None)
    with pytest.raises(HatpError) as refused:  # planted: a second process applies the same step
        b.write(first.ask_id, lambda s: Write(late, (Sent("ask", {"n": 2}, "human://acme.com/carol"),), (again,)))
    assert (refused.value.rule, refused.value.code) == ("HATP-GW-76", "TIMER_STEP_TAKEN")
    assert "applied by 'gw-a'" in refused.value.reason
    assert refused.value.path == "timer_steps.txn-acme-0001/finance.sla human://acme.com/frank.2026-11-29T12:00:00Z"
    assert b.get(first.ask_id) == moved  # nothing of the refused write: not the ask, not its message
    assert b.sent() == [(first.ask_id, "vote", None, {"decision": "moved"})]
    assert b.timer_steps(first.ask_id) == [step]
    a.close()
    b.close()


def test_HATP_GW_77_a_proof_left_in_the_store_is_landed_by_one_process_and_keeps_its_first_outcome(
    backend: Backend,
) -> None:
    a, b = open_gateway_store(backend.url("gateway")), open_gateway_store(backend.url("gateway"))  # two processes
    first = a.create(stored())
    seq = a.submit_proof(first.ask_id, {"human": "bob", "nonce": "nonce-cccccccccccccccc"})
    landed = StoredAsk(first.ask_id, first.state, first.record, {"type": "hatp.vote", "decision": "landed"}, None)
    calls: list[str] = []
    a.update_spending(first.ask_id, "nonce-cccccccccccccccc", lambda s, used: calls.append("a") or landed, seq)
    # planted: the other process listed the proof before it was landed and lands it again from that stale list
    again = b.update_spending(first.ask_id, "nonce-cccccccccccccccc", lambda s, used: calls.append("b") or s, seq)
    b.settle_proof(seq, "refused", "HATP-GW-6", "nonce spent")  # what a stale refusal would record
    assert calls == ["a"] and again == landed
    assert [(p.status, p.rule) for p in b.proofs(first.ask_id)] == [("accepted", None)]
    a.close()
    b.close()

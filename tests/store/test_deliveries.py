"""The gateway's delivery queue on both backends, shared by several gateway processes (each queue object here is one
process's connection): a due delivery is claimed by one owner at a time under a lease, only the claim's holder
records an outcome, and a lapsed claim is taken over exactly once (spec/gateway.md HATP-GW-78/79). Lapse is made by
a lease of 0 seconds (the database's clock decides), never by waiting."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from hatp_mcp.core.gateway.notice import Notice, notice_key
from hatp_mcp.errors import HatpError
from hatp_mcp.store.deliveries import DeliveryQueue, DeliveryStore
from hatp_mcp.store.url import open_delivery_queue
from tests.store.conftest import Backend

NOW = "2026-11-29T10:00:00Z"


def delivery_queue(backend: Backend) -> DeliveryQueue:
    """One process's queue beside the backend's gateway store (closed when the test ends)."""
    return backend.closing(open_delivery_queue(backend.url("gateway")))


def notice(n: int = 1, human: str = "human://acme.com/frank") -> Notice:
    ask_id = f"txn-q-{n}/finance"
    return Notice(notice_key(ask_id, human, "ask"), ask_id, human, "ask", "Approval needed", "text", "http://x")


def test_HATP_GW_78_a_delivery_claimed_by_one_process_is_not_taken_by_another_and_only_its_holder_settles_it(
    backend: Backend,
) -> None:
    a, b = delivery_queue(backend), delivery_queue(backend)
    assert a.enqueue(notice(), NOW) and not b.enqueue(notice(), NOW)  # queued once, whoever queues it
    (claim,) = a.claim_due(NOW, "gw-a", lease_seconds=300)
    assert (claim.owner, claim.epoch) == ("gw-a", 1)
    assert b.claim_due(NOW, "gw-b", lease_seconds=300) == []  # a live claim: left to its holder
    forged = type(claim)(claim.delivery, "gw-b", claim.epoch)
    with pytest.raises(HatpError) as refused:
        b.settle(forged, state="sent", channel=0, attempt=1, next_at=NOW, sent_via="sms")
    assert (refused.value.rule, refused.value.code) == ("HATP-GW-79", "CLAIM_LOST")
    assert "held by 'gw-a' at epoch 1" in refused.value.reason
    assert b.get(claim.key).state == "queued"  # type: ignore[union-attr]  # nothing of the refused outcome
    a.settle(claim, state="sent", channel=0, attempt=1, next_at=NOW, sent_via="sms")
    assert b.get(claim.key).state == "sent"  # type: ignore[union-attr]
    assert b.claim_due(NOW, "gw-b", lease_seconds=300) == []  # sent: never claimed again


def test_HATP_GW_79_a_lapsed_claim_is_taken_over_once_at_the_next_epoch_and_the_late_outcome_is_refused(
    backend: Backend,
) -> None:
    a, b, c = delivery_queue(backend), delivery_queue(backend), delivery_queue(backend)
    a.enqueue(notice(), NOW)
    (dead,) = a.claim_due(NOW, "gw-a", lease_seconds=0)  # gw-a "dies" mid-send: its lease lapses at once
    (taken,) = b.claim_due(NOW, "gw-b", lease_seconds=300)
    assert (taken.owner, taken.epoch) == ("gw-b", 2)
    assert c.claim_due(NOW, "gw-c", lease_seconds=300) == []  # taken over exactly once
    with pytest.raises(HatpError) as late:  # gw-a wakes up and reports its send
        a.settle(dead, state="failed", channel=0, attempt=1, next_at=NOW, failures=["sms: HTTP 500"])
    assert late.value.code == "CLAIM_LOST" and "held by 'gw-b' at epoch 2" in late.value.reason
    b.settle(taken, state="sent", channel=0, attempt=1, next_at=NOW, sent_via="sms")
    (row,) = c.all()
    assert (row.state, row.sent_via, row.failures) == ("sent", "sms", [])


def test_HATP_GW_78_processes_claiming_at_once_take_every_due_delivery_exactly_once(backend: Backend) -> None:
    queues = [delivery_queue(backend) for _ in range(4)]
    for n in range(40):
        queues[n % 4].enqueue(notice(n), NOW)
    queues[0].enqueue(notice(99), "2026-11-29T11:00:00Z")  # not due yet: nobody takes it
    taken: list[str] = []
    lock = threading.Lock()

    def claimer(i: int) -> None:
        while got := queues[i].claim_due(NOW, f"gw-{i}", lease_seconds=300, limit=3):
            with lock:
                taken.extend(c.key for c in got)

    threads = [threading.Thread(target=claimer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert sorted(taken) == sorted(notice(n).key for n in range(40))  # each once, all of them


def test_a_queue_written_before_claims_existed_gains_them_and_keeps_its_rows(tmp_path: Path) -> None:
    old = sqlite3.connect(tmp_path / "deliveries.db")
    old.executescript(
        "CREATE TABLE deliveries (key TEXT PRIMARY KEY, ask_id TEXT NOT NULL, human TEXT NOT NULL, kind TEXT NOT NULL,"
        " notice TEXT NOT NULL, state TEXT NOT NULL, channel INTEGER NOT NULL DEFAULT 0,"
        " attempt INTEGER NOT NULL DEFAULT 0, next_at TEXT NOT NULL, sent_via TEXT,"
        " failures TEXT NOT NULL DEFAULT '[]');"
    )
    n = notice()
    old.execute(
        "INSERT INTO deliveries (key, ask_id, human, kind, notice, state, next_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (n.key, n.ask_id, n.human, n.kind, json.dumps(n.wire()), "queued", NOW),
    )
    old.commit()
    old.close()
    queue = DeliveryStore(tmp_path)
    try:
        (claim,) = queue.claim_due(NOW, "gw-a", lease_seconds=300)
        assert claim.delivery.notice == n and claim.epoch == 1
    finally:
        queue.close()

"""HATP-STORE-2 on both backends: what the coordinator forces (HATP-TXN-4) is committed, visible to any other
process opening the store, before the message that depends on it is sent; and a participant's answer is committed
before it is returned. The watcher reads the store on a connection of its own, as a replacement would.

A planted violation: a log that says "durable" before it wrote (the write left for later) is caught by the same
watcher, with the first message sent too early named.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.messages import CommitRequest, PrepareRequest
from hatp_mcp.core.txn.events import Outcome
from hatp_mcp.store.participant_state import BranchRow
from hatp_mcp.store.txn_log import LogEntry, LoggedTxn, TxnLog
from hatp_mcp.store.url import StoreUrl, open_participant_store, open_txn_log
from tests.store.conftest import Backend
from tests.txn_helpers import drive

TXN = "txn-durable-0001"
PARTICIPANTS = ("airline", "hotel", "calendar", "payments")


def committed_log(url: StoreUrl, txn_id: str) -> tuple[list[str], list[str]]:
    """(the events, the decisions) another process sees committed for `txn_id`, read on a connection of its own."""
    if url.backend == "sqlite":
        conn = sqlite3.connect(url.target)
        try:
            events = conn.execute("SELECT event FROM txn_event WHERE txn_id = ? ORDER BY seq", (txn_id,)).fetchall()
            decisions = conn.execute("SELECT decision FROM txn_decision WHERE txn_id = ? ORDER BY n", (txn_id,))
            return [json.loads(e)["event"] for (e,) in events], [d for (d,) in decisions.fetchall()]
        finally:
            conn.close()
    with psycopg.connect(url.target) as pg:
        rows = pg.execute("SELECT event FROM txn_event WHERE txn_id = %s ORDER BY seq", (txn_id,)).fetchall()
        ds = pg.execute("SELECT decision FROM txn_decision WHERE txn_id = %s ORDER BY n", (txn_id,)).fetchall()
    return [json.loads(e)["event"] for (e,) in rows], [d for (d,) in ds]


class BranchRows:
    """The trip's participants' branch rows, read through stores of the watcher's own (SQLite: a file each; on
    PostgreSQL the test's one database)."""

    def __init__(self, backend: Backend) -> None:
        self.stores = [backend.closing(open_participant_store(backend.url(f"state-{n}"))) for n in PARTICIPANTS]

    def get(self, txn_id: str, branch_id: str) -> BranchRow | None:
        found = [r for s in self.stores if (r := s.get(txn_id, branch_id)) is not None]
        return found[0] if found else None


class Watcher:
    """Wraps each participant: at every prepare and commit the coordinator sends, what must already be committed
    in the log is checked from outside; at every answer a participant returns, its branch row."""

    def __init__(self, world: World, log_url: StoreUrl, rows: BranchRows) -> None:
        self.log_url = log_url
        self.rows = rows
        self.too_early: list[str] = []
        self.checked: list[str] = []
        for participant in world.participants.values():
            self._wrap(participant)

    def _wrap(self, participant: Any) -> None:
        prepare, commit = participant.prepare, participant.commit

        async def watched_prepare(req: PrepareRequest) -> Any:
            events, _ = committed_log(self.log_url, req.txn_id)
            if "txn.begin" not in events:  # HATP-TXN-4: begin is forced before any prepare goes out
                self.too_early.append(f"prepare {req.branch_id} before txn.begin was durable")
            answer = await prepare(req)
            self._answer_kept(req.txn_id, req.branch_id, "prepare")
            return answer

        async def watched_commit(req: CommitRequest) -> Any:
            _, decisions = committed_log(self.log_url, req.txn_id)
            if decisions[-1:] != ["commit"]:  # the decision is durable before any phase-2 message
                self.too_early.append(f"commit {req.branch_id} before the commit decision was durable")
            answer = await commit(req)
            self._answer_kept(req.txn_id, req.branch_id, "commit")
            return answer

        participant.prepare = watched_prepare
        participant.commit = watched_commit

    def _answer_kept(self, txn_id: str, branch_id: str, phase: str) -> None:
        row = self.rows.get(txn_id, branch_id)
        if row is None or phase not in row.answers:
            self.too_early.append(f"{branch_id}'s {phase} answer returned before it was kept")
        self.checked.append(f"{phase} {branch_id}")


def _world(clock: Any, log: TxnLog, backend: Backend) -> World:
    return build_world(
        clock, log=log, stores=lambda name: backend.closing(open_participant_store(backend.url(f"state-{name}")))
    )


@pytest.mark.anyio
async def test_what_is_forced_is_committed_before_the_send_that_depends_on_it_under_HATP_STORE_2(
    backend: Backend, clock: Any
) -> None:
    async with open_txn_log(backend.url("txn")) as log:
        world = _world(clock, log, backend)
        watcher = Watcher(world, backend.url("txn"), BranchRows(backend))
        result = await drive(
            clock, lambda: world.coordinator().run(trip_plan(clock.now(), TXN)), busy=lambda: not log.idle
        )
    assert result.outcome is Outcome.COMMITTED
    assert watcher.too_early == []
    assert sorted(watcher.checked) == sorted(
        [f"{phase} {b}" for phase in ("prepare", "commit") for b in ("seat", "room", "event", "pay")]
    )


class AcknowledgesBeforeWriting:
    """A planted violation of HATP-STORE-2: append returns at once, and its entries are written only by the next
    append (always one write behind)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.behind: tuple[str, Sequence[LogEntry]] | None = None

    async def append(self, txn_id: str, entries: Sequence[LogEntry], forced: bool = True) -> None:
        if self.behind is not None:
            await self.inner.append(*self.behind)
        self.behind = (txn_id, entries)

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return await self.inner.load(txn_id)

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()


@pytest.mark.anyio
async def test_a_log_that_acknowledges_before_it_writes_is_caught_sending_too_early(
    backend: Backend, clock: Any
) -> None:
    async with open_txn_log(backend.url("txn")) as real:
        log = AcknowledgesBeforeWriting(real)
        world = _world(clock, log, backend)  # type: ignore[arg-type]
        watcher = Watcher(world, backend.url("txn"), BranchRows(backend))
        await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now(), TXN)), busy=lambda: not real.idle)
    # every message sent too early is named: the prepares before the begin, a commit before the decision
    assert watcher.too_early[:4] == [
        f"prepare {b} before txn.begin was durable" for b in ("seat", "room", "event", "pay")
    ]
    assert "commit event before the commit decision was durable" in watcher.too_early

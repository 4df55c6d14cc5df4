"""HATP-PART-13: an effect that lives in the participant store's own database is kept with its answer by one
durable transaction, without an intent written first; an effect anywhere else keeps HATP-PART-10/11."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from demo.trip_world import AIRLINE, PAYMENTS, trip_plan
from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import CommitRequest, PrepareRequest, StatusRequest
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.participant.branch import Lease
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.participant.driver import ParticipantRuntime, Performed, StoreOperation
from hatp_mcp.store.participant_state import SqliteParticipantStore, StateDb

pytestmark = pytest.mark.anyio


class _Crash(BaseException):
    """Stands in for the process dying: nothing after this point runs."""


class LedgerOp(StoreOperation):
    """Writes each hold and effect as a row of a `ledger` table in `database`; can die right after writing."""

    def __init__(self, database: StateDb, store: SqliteParticipantStore) -> None:
        self.database = self.db = database
        self.store = store
        self.crash = False
        self.refuse = False
        self.seen: list[str | None] = []  # the branch's stored state while the effect was written
        with database.lock:
            database.conn.execute("CREATE TABLE IF NOT EXISTS ledger (key TEXT PRIMARY KEY, what TEXT)")

    def _write(self, txn_id: str, branch_id: str, key: str, what: str) -> None:
        row = self.store.get(txn_id, branch_id)
        self.seen.append(row.state if row else None)
        with self.db.transaction() as db:
            db.execute("INSERT OR IGNORE INTO ledger (key, what) VALUES (?, ?)", (key, what))
        if self.refuse:
            raise HatpError("HATP-PART-10", "declined", code="DECLINED")
        if self.crash:
            raise _Crash

    def hold_now(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        self._write(txn_id, branch.branch_id, f"{txn_id}:{branch.branch_id}:hold", "hold")

    def perform_now(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        self._write(txn_id, branch.branch_id, key, "commit")
        return f"undo-{key}"

    async def lookup(self, key: str, branch: Branch) -> Performed | None:
        with self.db.lock:
            found = self.db.conn.execute("SELECT 1 FROM ledger WHERE key = ?", (key,)).fetchone()
        return Performed(f"undo-{key}") if found else None

    def ledger(self) -> list[tuple[str, str]]:
        with self.db.lock:
            return list(self.db.conn.execute("SELECT key, what FROM ledger ORDER BY key").fetchall())


def runtime(
    tmp_path: Path, clock: FakeClock, uri: str, operation: str, *, apart: bool = False
) -> tuple[ParticipantRuntime, LedgerOp]:
    store = SqliteParticipantStore(tmp_path / "state.db")
    op = LedgerOp(StateDb(tmp_path / "outside.db") if apart else store.database, store)
    return ParticipantRuntime(uri, SigningKey.generate(["participant"]), {operation: op}, store, clock), op


def prep(plan: Plan, branch: str) -> PrepareRequest:
    return PrepareRequest(
        txn_id=plan.txn_id, branch_id=branch, plan_digest=plan.digest(), plan=plan, coordinator="c://x"
    )


def commit_req(plan: Plan, branch: str, pre: dict[str, object]) -> CommitRequest:
    return CommitRequest(
        txn_id=plan.txn_id, branch_id=branch, plan_digest=plan.digest(), preconditions=Preconditions.model_validate(pre)
    )


async def test_HATP_PART_13_a_commit_killed_inside_its_transaction_keeps_neither_effect_nor_answer(
    tmp_path: Path, clock: FakeClock
) -> None:
    pay, op = runtime(tmp_path, clock, PAYMENTS, "card.capture")
    plan = trip_plan(clock.now())
    res = await pay.prepare(prep(plan, "pay"))
    op.crash = True
    with pytest.raises(_Crash):
        await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    assert op.seen == ["prepared"]  # no intent was written before the effect
    assert op.ledger() == []  # the effect went with the transaction that was never committed
    status = await pay.status(StatusRequest(txn_id=plan.txn_id, branch_id="pay"))
    assert status.state == "prepared"  # neither: the commit can simply run again
    op.crash = False
    done = await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    key = f"{plan.txn_id}:pay"
    assert (done.receipt["outcome"], done.receipt["undoToken"]) == ("ok", f"undo-{key}")
    assert op.ledger() == [(key, "commit")]  # exactly once
    reopened = SqliteParticipantStore(tmp_path / "state.db").get(plan.txn_id, "pay")
    assert reopened is not None and reopened.state == "committed" and reopened.answers["commit"] == done.wire()


async def test_HATP_PART_13_an_effect_the_operation_refuses_is_rolled_back_with_it(
    tmp_path: Path, clock: FakeClock
) -> None:
    pay, op = runtime(tmp_path, clock, PAYMENTS, "card.capture")
    plan = trip_plan(clock.now())
    res = await pay.prepare(prep(plan, "pay"))
    op.refuse = True
    refused = await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    assert (refused.receipt["outcome"], refused.receipt["code"]) == ("refused", "DECLINED")
    assert op.ledger() == []  # what it wrote before refusing is not kept
    assert (await pay.status(StatusRequest(txn_id=plan.txn_id, branch_id="pay"))).state == "prepared"


async def test_HATP_PART_13_a_hold_killed_inside_its_transaction_is_not_placed_and_a_retry_places_it_once(
    tmp_path: Path, clock: FakeClock
) -> None:
    air, op = runtime(tmp_path, clock, AIRLINE, "seat.hold")
    plan = trip_plan(clock.now())
    op.crash = True
    with pytest.raises(_Crash):
        await air.prepare(prep(plan, "seat"))
    assert op.ledger() == [] and air.store.get(plan.txn_id, "seat") is None
    op.crash = False
    res = await air.prepare(prep(plan, "seat"))
    assert res.vote["decision"] == "yes" and op.ledger() == [(f"{plan.txn_id}:seat:hold", "hold")]


async def test_HATP_PART_13_an_operation_on_another_database_writes_its_intent_first(
    tmp_path: Path, clock: FakeClock
) -> None:
    pay, op = runtime(tmp_path, clock, PAYMENTS, "card.capture", apart=True)
    plan = trip_plan(clock.now())
    res = await pay.prepare(prep(plan, "pay"))
    op.crash = True
    with pytest.raises(_Crash):
        await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    key = f"{plan.txn_id}:pay"
    assert op.seen == ["committing"] and op.ledger() == [(key, "commit")]  # HATP-PART-10: intent, then effect
    assert (await pay.status(StatusRequest(txn_id=plan.txn_id, branch_id="pay"))).state == "committing"
    op.crash = False
    done = await pay.commit(commit_req(plan, "pay", res.receipt["preconditions"]))
    assert done.receipt["outcome"] == "ok" and op.seen == ["committing"]  # HATP-PART-11: looked up, not redone

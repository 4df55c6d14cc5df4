"""Where a demo tool server (servers/_participant.py, in memory) keeps its txnId bindings (spec/mcp-binding.md
HATP-TRUST-5): in state.db, written by the one durable transaction that keeps a prepare's hold and answer (no sync
of its own), before any answer leaves."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.messages import RenewRequest
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.participant_client import mcp_participant
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator_trust import write_trust_list
from hatp_mcp.store.participant_state import SqliteParticipantStore
from servers import airline
from servers._participant import build
from tests.coordinators import COORDINATOR, KEY, OTHER, OTHER_KEY, signer
from tests.e2e.plans import keyring_of, live_plan, prepare_for

pytestmark = pytest.mark.anyio
AIRLINE = "mcp://airline.example/hatp"


def trusting_both(data: Path) -> Path:
    write_trust_list(data, {COORDINATOR: KEY.public_jwk(), OTHER: OTHER_KEY.public_jwk()})
    return data


class Writes:
    """The durable write transactions a connection runs (each one sync): a COMMIT, or a write outside BEGIN."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.count = 0
        self._open = False
        conn.set_trace_callback(self._seen)

    def _seen(self, sql: str) -> None:
        word = sql.lstrip().split(None, 1)[0].upper()
        if word == "BEGIN":
            self._open = True
        elif word in ("COMMIT", "ROLLBACK"):
            self._open = False
            self.count += word == "COMMIT"
        elif word in ("INSERT", "UPDATE", "DELETE", "REPLACE") and not self._open:
            self.count += 1


def store_of(runtime: Any) -> SqliteParticipantStore:
    assert isinstance(runtime.store, SqliteParticipantStore)
    return runtime.store


def bound(data: Path, txn_id: str) -> tuple[str, str] | None:
    conn = sqlite3.connect(data / "state.db")
    try:
        row = conn.execute("SELECT coordinator, plan_digest FROM txn_bindings WHERE txn_id = ?", (txn_id,)).fetchone()
    finally:
        conn.close()
    return (row[0], row[1]) if row is not None else None


async def test_HATP_TRUST_5_a_prepare_keeps_its_binding_with_its_hold_and_answer_in_one_durable_write(
    tmp_path: Path,
) -> None:
    data = trusting_both(tmp_path / "airline")
    plan = live_plan("txn-bind-one-write", seat={"seat": "3A"})
    server, runtime, inventory = build(airline.SPEC, data)
    writes = Writes(store_of(runtime).database.conn)
    with anyio.fail_after(10):
        async with Client(server) as client:
            part = mcp_participant(AIRLINE, client, keyring_of(data), signer=signer(SystemClock()))
            prepared = await part.prepare(prepare_for(plan, "seat"))
            again = await part.prepare(prepare_for(plan, "seat"))
    assert prepared.vote["decision"] == "yes" and again == prepared  # the first answer, again (HATP-PART-6)
    assert writes.count == 1  # the hold, the answer and the binding: one transaction, one sync
    assert bound(data, plan.txn_id) == (COORDINATOR, plan.digest())
    assert not (data / "coordinators.db").exists()  # bindings live in state.db now
    inventory.close()
    # after a restart the binding holds: another trusted coordinator cannot take the transaction over
    server, runtime, inventory = build(airline.SPEC, data)
    with anyio.fail_after(10):
        async with Client(server) as client:
            other = mcp_participant(AIRLINE, client, keyring_of(data), signer=signer(SystemClock(), OTHER, OTHER_KEY))
            with pytest.raises(HatpError) as err:
                await other.prepare(replace_coordinator(prepare_for(plan, "seat"), OTHER))
    assert (err.value.rule, err.value.code) == ("HATP-TRUST-5", "TXN_BOUND")
    inventory.close()


def replace_coordinator(req: Any, coordinator: str) -> Any:
    return req.model_copy(update={"coordinator": coordinator})


async def test_HATP_TRUST_5_a_first_request_that_keeps_no_state_still_binds_durably_before_its_answer(
    tmp_path: Path,
) -> None:
    """A renew of a branch never prepared here keeps nothing; its binding is written alone before it is answered."""
    data = trusting_both(tmp_path / "airline")
    plan = live_plan("txn-bind-alone")
    server, runtime, inventory = build(airline.SPEC, data)
    writes = Writes(store_of(runtime).database.conn)
    with anyio.fail_after(10):
        async with Client(server) as client:
            part = mcp_participant(AIRLINE, client, keyring_of(data), signer=signer(SystemClock()))
            answer = await part.renew(
                RenewRequest(txn_id=plan.txn_id, branch_id="seat", plan_digest=plan.digest(), lease_seconds=60)
            )
    assert answer.receipt["outcome"] == "refused" and answer.receipt["code"] == "NOT_PREPARED"
    assert writes.count == 1 and bound(data, plan.txn_id) == (COORDINATOR, plan.digest())
    assert store_of(runtime).get(plan.txn_id, "seat") is None
    inventory.close()

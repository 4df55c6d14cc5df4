"""Kill a real participant process (SIGKILL) between a commit's effect and the save of its state, start it again
on the same --data and retry the commit: the effect happened exactly once and the answer is the commit's.
With the inventory in a database of its own (TEST-ONLY --effects-apart, an outside system's) the intent is durable
and the retry reconciles (HATP-PART-10, HATP-PART-11); with the inventory in the store's database the kill lands
inside the one transaction, so neither the effect nor the answer is kept and the retry commits (HATP-PART-13).
The fault point is the servers' TEST-ONLY --crash-after-effect flag."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import CommitRequest, PrepareRequest, StatusRequest
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.mcp.launch import launch_http
from hatp_mcp.store.participant_state import StateDb
from servers._inventory import Inventory
from tests.coordinators import commit_request, trusting
from tests.e2e.plans import keyring_of, live_plan, participant, prepare_for

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

PAYMENTS = "mcp://payments.example/hatp"


async def commit_until_killed(url: str, uri: str, ring: Keyring, req: PrepareRequest) -> CommitRequest:
    """Prepare, then commit on a server started to die right after the effect: the commit gets no answer."""
    answered, commit = None, None
    try:
        async with Client(url) as client:
            part = participant(uri, client, ring)
            prepared = await part.prepare(req)
            pre = Preconditions.model_validate(prepared.receipt["preconditions"])
            commit = commit_request(
                prepared.vote,
                txn_id=req.txn_id,
                branch_id=req.branch_id,
                plan_digest=req.plan_digest,
                preconditions=pre,
            )
            answered = await part.commit(commit)
    except Exception:  # the process died mid-commit: no answer (the transport's error, maybe a group)
        pass
    assert answered is None and commit is not None  # prepared, then killed inside the commit
    return commit


@pytest.mark.parametrize(
    ("module", "uri", "branch", "resource"),
    [
        ("servers.payments", PAYMENTS, "pay", "tok_visa_4242"),  # final: a capture charged twice is lost money
        ("servers.airline", "mcp://airline.example/hatp", "seat", None),  # hold: the booking
    ],
)
async def test_HATP_PART_11_a_participant_killed_between_effect_and_save_makes_the_effect_exactly_once(
    tmp_path: Path, module: str, uri: str, branch: str, resource: str | None
) -> None:
    data = tmp_path / module
    plan = live_plan(f"txn-crash-{branch}", seat={"seat": "7C"})
    req = prepare_for(plan, branch)
    with anyio.fail_after(90):
        extra = ["--crash-after-effect", "--effects-apart"]
        async with launch_http(module, trusting(data), extra=extra, ready_timeout=60) as first:
            ring = keyring_of(data)
            commit = await commit_until_killed(first.url, uri, ring, req)
            assert await first.process.wait() == -9  # SIGKILL, right after the effect
        inventory = Inventory(data / "inventory.db")
        key = f"{req.txn_id}:{branch}"
        assert [e.key for e in inventory.effects() if e.kind == "commit"] == [key]  # the effect was made
        again_extra = ["--effects-apart"]
        async with (
            launch_http(module, trusting(data), extra=again_extra, ready_timeout=60) as second,
            Client(second.url) as client,
        ):
            part = participant(uri, client, ring)
            assert (
                await part.status(StatusRequest(txn_id=req.txn_id, branch_id=branch))
            ).state == "committing"  # the intent is durable, the effect unsaved (HATP-PART-11)
            done = await part.commit(commit)
            again = await part.commit(commit)
            status = await part.status(StatusRequest(txn_id=req.txn_id, branch_id=branch))
    assert done.receipt["outcome"] == "ok" and again == done  # the commit's answer, the same every time
    assert status.state == "committed" and status.receipt == done.receipt
    assert [e.key for e in inventory.effects() if e.kind == "commit"] == [key]  # exactly once
    if resource is None:
        taken = [i for i in inventory.all() if i.holder == req.txn_id]
        assert [i.state for i in taken] == ["taken"]
    inventory.close()


@pytest.mark.parametrize(
    ("module", "uri", "branch"),
    [("servers.payments", PAYMENTS, "pay"), ("servers.airline", "mcp://airline.example/hatp", "seat")],
)
async def test_HATP_PART_13_a_participant_killed_inside_the_commit_transaction_keeps_neither_effect_nor_answer(
    tmp_path: Path, module: str, uri: str, branch: str
) -> None:
    data = tmp_path / module
    plan = live_plan(f"txn-crash13-{branch}", seat={"seat": "7D"})
    req = prepare_for(plan, branch)
    key = f"{req.txn_id}:{branch}"
    with anyio.fail_after(90):
        async with launch_http(module, trusting(data), extra=["--crash-after-effect"], ready_timeout=60) as first:
            ring = keyring_of(data)
            commit = await commit_until_killed(first.url, uri, ring, req)
            assert await first.process.wait() == -9  # SIGKILL, right after the effect was written
        inventory = Inventory(StateDb(data / "state.db"))  # the store's database holds the inventory
        assert [e for e in inventory.effects() if e.kind == "commit"] == []  # rolled back with the answer
        assert [i.state for i in inventory.all() if i.holder == req.txn_id] == (["held"] if branch == "seat" else [])
        async with launch_http(module, trusting(data), ready_timeout=60) as second, Client(second.url) as client:
            part = participant(uri, client, ring)
            before = await part.status(StatusRequest(txn_id=req.txn_id, branch_id=branch))
            done = await part.commit(commit)
            again = await part.commit(commit)
            status = await part.status(StatusRequest(txn_id=req.txn_id, branch_id=branch))
    assert before.state == "prepared"  # neither effect nor intent was kept: never "committing"
    assert done.receipt["outcome"] == "ok" and again == done
    assert status.state == "committed" and status.receipt == done.receipt
    assert [e.key for e in inventory.effects() if e.kind == "commit"] == [key]  # exactly once
    inventory.close()


async def test_HATP_TRUST_5_a_participant_killed_inside_the_prepare_transaction_keeps_neither_hold_nor_binding(
    tmp_path: Path,
) -> None:
    """The binding is kept by the transaction that keeps the prepare's hold and answer (state.db): killed inside
    it (after the hold, before COMMIT) the process keeps none of the three, and the coordinator's retry after the
    restart prepares and binds as a first request. (Before, the binding was a durable write of its own in
    coordinators.db, so a kill between the two left a bound txnId holding nothing.)"""
    data = tmp_path / "airline"
    uri = "mcp://airline.example/hatp"
    plan = live_plan("txn-crash-bind", seat={"seat": "7E"})
    req = prepare_for(plan, "seat")
    with anyio.fail_after(90):
        async with launch_http(
            "servers.airline", trusting(data), extra=["--crash-after-hold"], ready_timeout=60
        ) as first:
            ring = keyring_of(data)
            answered = None
            try:
                async with Client(first.url) as client:
                    answered = await participant(uri, client, ring).prepare(req)
            except Exception:  # the process died inside the prepare: no answer
                pass
            assert answered is None
            assert await first.process.wait() == -9
        db = StateDb(data / "state.db")
        assert db.conn.execute("SELECT * FROM txn_bindings").fetchall() == []  # the binding went with the hold
        assert db.conn.execute("SELECT * FROM branch_state").fetchall() == []
        inventory = Inventory(db)
        assert [i for i in inventory.all() if i.holder == req.txn_id] == []
        async with launch_http("servers.airline", trusting(data), ready_timeout=60) as second:
            async with Client(second.url) as client:
                part = participant(uri, client, ring)
                done = await part.prepare(req)
                again = await part.prepare(req)
    assert done.vote["decision"] == "yes" and again == done
    row = db.conn.execute(
        "SELECT coordinator, plan_digest FROM txn_bindings WHERE txn_id = ?", (req.txn_id,)
    ).fetchone()
    assert tuple(row) == (req.coordinator, req.plan_digest)
    assert [i.state for i in inventory.all() if i.holder == req.txn_id] == ["held"]
    inventory.close()

"""Fencing-token locks across real processes: `servers.payments` with --serve-locks on a pinned clock (--now), the
test as the coordinator through the code the coordinator runs (hatp_mcp.runtime.coordinator.plan_locks over the MCP
participant client). A transaction locks the card, prepares, commits with the token and gives it back; a stale
writer whose lease ended while another transaction took the card is refused; an unproven lock request is refused
with its rule (spec/coordinator.md HATP-LOCK-2, 4, 6..9)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import StatusRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.mcp.launch import launch_http
from hatp_mcp.mcp.participant_client import McpParticipant
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.coordinator.plan_locks import PlanLocks
from tests.coordinators import COORDINATOR, commit_request, signer, trusting
from tests.e2e.plans import keyring_of, live_plan, prepare_for
from tests.locks import acquire

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
PAYMENTS = "mcp://payments.example/hatp"
CARD = "card/tok_visa_4242"


def card_plan(txn_id: str, now: datetime, commit_within: int = 60) -> Plan:
    """The live trip plan whose pay branch locks the card, to be committed within `commit_within` s of `now`."""
    data = live_plan(txn_id).wire()
    data["deadlines"]["commitBy"] = format_ts(now + timedelta(seconds=commit_within))
    for b in data["branches"]:
        if b["branchId"] == "pay":
            b["locks"] = [CARD]
    return Plan.model_validate(data)


@asynccontextmanager
async def payments_at(data: Path, now: datetime) -> AsyncIterator[tuple[Client, McpParticipant]]:
    """The payments server on `data`, its clock pinned at `now`, and the test coordinator signing at `now`."""
    extra = ["--serve-locks", "--now", format_ts(now)]
    async with launch_http("servers.payments", data, extra=extra, ready_timeout=60) as proc, Client(proc.url) as client:
        yield client, McpParticipant(PAYMENTS, client, keyring_of(data), signer=signer(FakeClock(now)))


async def state(part: McpParticipant, plan: Plan) -> str:
    return (await part.status(StatusRequest(txn_id=plan.txn_id, branch_id="pay"))).state


async def commit(part: McpParticipant, locks: PlanLocks, plan: Plan, prepared: Any, now: datetime) -> Any:
    tokens = await locks.tokens(part, plan, plan.digest(), plan.branch("pay"), now)
    pre = Preconditions.model_validate(prepared.receipt["preconditions"])
    req = commit_request(
        prepared.vote,
        txn_id=plan.txn_id,
        branch_id="pay",
        plan_digest=plan.digest(),
        preconditions=pre,
        lock_tokens=tokens,
    )
    return (await part.commit(req)).receipt


async def test_HATP_LOCK_7_a_transaction_locks_the_card_commits_with_its_token_and_gives_it_back(
    tmp_path: Path,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    data = trusting(tmp_path / "payments")
    plan = card_plan("txn-e2e-locked", now)
    locks = PlanLocks()
    with anyio.fail_after(90):
        async with payments_at(data, now) as (_client, part):
            await locks.take(part, plan, plan.digest(), plan.branch("pay"), now)
            prepared = await part.prepare(prepare_for(plan, "pay"))
            done = await commit(part, locks, plan, prepared, now)
            await locks.give_back(part, plan.txn_id, "pay", plan.digest())
            charged = await state(part, plan)
            after = await part.acquire_lock(acquire(CARD, "txn-e2e-after", branch_id="pay"))
    assert prepared.vote["decision"] == "yes"
    assert done["outcome"] == "ok" and charged == "committed"
    assert (after.owner, after.token) == ("txn-e2e-after", 2)  # released: free at once, and the token grew


async def test_HATP_LOCK_2_a_stale_writer_is_refused_after_another_transaction_took_the_card_past_its_lease(
    tmp_path: Path,
) -> None:
    start = datetime.now(UTC).replace(microsecond=0)
    data = trusting(tmp_path / "payments")
    stale = card_plan("txn-e2e-stale", start, commit_within=60)  # its lock lasts 60 s
    stale_locks = PlanLocks()
    with anyio.fail_after(120):
        async with payments_at(data, start) as (_client, part):
            await stale_locks.take(part, stale, stale.digest(), stale.branch("pay"), start)
            stale_prepared = await part.prepare(prepare_for(stale, "pay"))
        # the stale coordinator stalls; the server is back two minutes later (a pinned clock, no sleeping)
        later = start + timedelta(seconds=120)
        async with payments_at(data, later) as (_client, part):
            fresh = card_plan("txn-e2e-fresh", later)
            fresh_locks = PlanLocks()
            await fresh_locks.take(part, fresh, fresh.digest(), fresh.branch("pay"), later)
            fresh_done = await commit(part, fresh_locks, fresh, await part.prepare(prepare_for(fresh, "pay")), later)
            stale_done = await commit(part, stale_locks, stale, stale_prepared, later)  # still holds token 1
            states = (await state(part, stale), await state(part, fresh))
    assert fresh_done["outcome"] == "ok"
    assert (stale_done["outcome"], stale_done["code"]) == ("refused", "STALE_TOKEN")
    assert "token 1" in stale_done["reason"] and "the live token is 2" in stale_done["reason"]
    assert states == ("prepared", "committed")  # captured once, by the fresh transaction; the stale one wrote nothing


async def test_HATP_LOCK_4_an_unproven_lock_request_is_refused_with_its_rule_and_takes_nothing(
    tmp_path: Path,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    data = trusting(tmp_path / "payments")
    ask = acquire(CARD, "txn-e2e-mallory", 3600, branch_id="pay").wire()
    stranger = signer(FakeClock(now), COORDINATOR, SigningKey.generate(["coordinator"]))  # a key no one pinned
    refused: list[tuple[str, str]] = []
    with anyio.fail_after(90):
        async with payments_at(data, now) as (client, part):
            for params in (ask, stranger("lock-acquire", ask)):
                with pytest.raises(HatpError) as err:
                    await call_raw(client, "hatp/lock/acquire", params, 10)
                refused.append((err.value.rule, err.value.code))
            mine = await part.acquire_lock(acquire(CARD, "txn-e2e-mine", branch_id="pay"))
    assert refused == [("HATP-TRUST-1", "COORDINATOR_UNPROVEN"), ("HATP-TRUST-2", "COORDINATOR_UNPROVEN")]
    assert (mine.owner, mine.token) == ("txn-e2e-mine", 1)  # the refused requests took nothing

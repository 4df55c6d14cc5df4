"""GatewayApprover.watch, the long poll behind hatp/txn/voted with waitSeconds (HATP-MCP-40): it answers the moment
the signed answer changes (a decision here, one `hatp inbox` left in the store, an expiry), at once for a decided
or refused ask, and never for an ask it was not given."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from tests.acme_org import decide_as, plan, signed_for
from tests.mcp.gateway_fixture import make_gateway

pytestmark = pytest.mark.anyio

ASK = "txn-acme-0001/finance"


@pytest.fixture
async def gw(tmp_path: Path, clock: FakeClock) -> AsyncIterator[GatewayApprover]:
    g = make_gateway(tmp_path, clock)
    yield g
    g.store.close()


async def test_a_long_poll_answers_the_moment_the_quorum_decides_and_not_on_a_first_approval_HATP_MCP_40(
    gw: GatewayApprover,
) -> None:
    await gw.ask(plan(), "finance")
    answers: list[str] = []
    with anyio.fail_after(5):  # far below the hold: only the decision can end the wait
        async with anyio.create_task_group() as tg:

            async def poller() -> None:
                answers.append(str((await gw.wait("txn-acme-0001", "finance", 3600)).vote["decision"]))

            tg.start_soon(poller)
            await anyio.wait_all_tasks_blocked()
            await decide_as(gw, ASK, "bob", "approve")  # one of two: the signed vote is still pending
            await anyio.wait_all_tasks_blocked()
            assert answers == []
            await decide_as(gw, ASK, "carol", "approve")
    assert answers == ["yes"]


async def test_a_long_poll_answers_a_decision_left_by_hatp_inbox_once_the_timer_loop_lands_it_HATP_MCP_40(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    await gw.ask(plan(), "finance")
    answers: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(gw.run)

            async def poller() -> None:
                answers.append(str((await gw.wait("txn-acme-0001", "finance", 3600)).vote["decision"]))
                tg.cancel_scope.cancel()

            tg.start_soon(poller)
            await anyio.wait_all_tasks_blocked()
            for name in ("bob", "carol"):  # what `hatp inbox approve` does: a signed proof left in the store
                gw.store.submit_proof(ASK, signed_for(gw.store, ASK, name, "approve", clock.now()))
            clock.advance(gw.proof_poll.total_seconds())  # the loop looks for left proofs every proof_poll
    assert answers == ["yes"]


async def test_a_long_poll_answers_when_the_deadline_passes_on_the_gateways_clock(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    await gw.ask(plan(), "finance")
    answers: list[tuple[str, str | None]] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(gw.run)

            async def poller() -> None:
                vote = (await gw.wait("txn-acme-0001", "finance", 3600)).vote
                answers.append((str(vote["decision"]), vote.get("code")))
                tg.cancel_scope.cancel()

            tg.start_soon(poller)
            await anyio.wait_all_tasks_blocked()
            clock.advance(5 * 3600)  # past decideBy (14:00 from 10:00)
    assert answers == [("no", "DEADLINE_PASSED")]


async def test_a_long_poll_on_a_decided_ask_answers_at_once_and_on_an_unknown_ask_raises_before_waiting(
    gw: GatewayApprover,
) -> None:
    await gw.ask(plan(), "finance")
    await decide_as(gw, ASK, "bob", "reject")
    with anyio.fail_after(5):
        assert (await gw.wait("txn-acme-0001", "finance", 3600)).vote["decision"] == "no"
        with pytest.raises(KeyError):
            await gw.wait("txn-acme-0001", "legal", 3600)


async def test_a_long_poll_with_nothing_changing_answers_the_same_pending_vote_after_its_hold(
    gw: GatewayApprover,
) -> None:
    first = await gw.ask(plan(), "finance")
    with anyio.fail_after(5):
        held = await gw.wait("txn-acme-0001", "finance", 0.05)  # the hold is real time (a transport bound)
    assert held.vote == first.vote and held.approval is None

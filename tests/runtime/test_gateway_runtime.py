"""GatewayApprover on a fake clock: signed pending votes, approvals landing, SLA escalation and deadlines by
timer, refusals as signed no votes, and contact details that never leave the gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from hatp_mcp.core.evidence import verify_raw
from hatp_mcp.core.keys import SigningKey
from hatp_mcp.core.model.evidence import Approval, Vote
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway import GatewayApprover, RecordingNotifier
from hatp_mcp.store.gateway_store import GatewayStore
from tests.acme_org import GATEWAY_ID, contacts, directory, gateway_key, h, keyring, plan

pytestmark = pytest.mark.anyio


@pytest.fixture
async def gw(tmp_path: Path, clock: FakeClock) -> AsyncIterator[GatewayApprover]:
    store = GatewayStore(tmp_path)
    for human, book in contacts().items():
        for channel, address in book.items():
            store.set_contact(human, channel, address)
    g = GatewayApprover(
        directory=directory(), key=gateway_key(), store=store, clock=clock, notifier=RecordingNotifier()
    )
    yield g
    store.close()


async def test_asking_returns_a_signed_pending_vote_with_the_deadline_and_is_idempotent(gw: GatewayApprover) -> None:
    p = plan()
    first = await gw.ask(p, "finance")
    assert verify_raw(first.vote, keyring(), role="gateway")
    vote = Vote.model_validate(first.vote)
    assert (vote.decision, vote.decide_by, vote.voter, vote.plan_digest) == (
        "pending",
        "2026-11-29T14:00:00Z",
        GATEWAY_ID,
        p.digest(),
    )
    assert first.approval is None
    assert await gw.ask(p, "finance") == first


async def test_a_quorum_of_two_lands_as_a_signed_approval_and_a_yes_vote_under_HATP_GW_18(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan()
    await gw.ask(p, "finance")
    clock.advance(600)
    await gw.decide("txn-acme-0001/finance", h("bob"), "approve")
    assert (await gw.poll(p.txn_id, "finance")).vote["decision"] == "pending"
    await gw.decide("txn-acme-0001/finance", h("carol"), "approve")
    ans = await gw.poll(p.txn_id, "finance")
    assert ans.approval is not None
    verify_raw(ans.vote, keyring(), role="gateway")
    verify_raw(ans.approval, keyring(), role="gateway")
    approval = Approval.model_validate(ans.approval)
    assert (approval.decision, approval.txn_id, approval.plan_digest) == ("approve", p.txn_id, p.digest())
    assert [d.approver for d in approval.decisions] == [h("bob"), h("carol")]
    assert approval.routing.checked.status == "checked"
    assert ans.vote["decision"] == "yes"
    assert await gw.poll(p.txn_id, "finance") == ans  # signed once, returned the same every time


async def test_self_approval_through_the_runtime_is_refused_under_HATP_GW_5_and_nothing_is_signed(
    gw: GatewayApprover,
) -> None:
    p = plan()
    await gw.ask(p, "finance")
    with pytest.raises(HatpError) as e:
        await gw.decide("txn-acme-0001/finance", h("dana"), "approve")
    assert e.value.rule == "HATP-GW-5"
    assert (await gw.poll(p.txn_id, "finance")).approval is None


async def test_a_requirement_below_the_total_is_answered_with_a_signed_no_vote_naming_HATP_GW_1(
    gw: GatewayApprover,
) -> None:
    ans = await gw.ask(plan(max_amount="100"), "finance")
    verify_raw(ans.vote, keyring(), role="gateway")
    assert (ans.vote["decision"], ans.vote["code"]) == ("no", "HATP-GW-1")


async def test_the_timer_escalates_a_missed_sla_to_the_delegate_under_HATP_GW_10(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    notifier = gw.notifier
    assert isinstance(notifier, RecordingNotifier)
    p = plan(address="human://acme.com/frank")
    await gw.ask(p, "finance")
    assert [d[0] for d in notifier.delivered] == [h("frank")]
    async with anyio.create_task_group() as tg:
        await tg.start(gw.run)
        with anyio.fail_after(5):
            while clock.sleepers == 0:
                await anyio.lowlevel.checkpoint()
        clock.advance(2 * 3600)
        with anyio.fail_after(5):
            while len(notifier.delivered) < 2:
                await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    assert [d[0] for d in notifier.delivered] == [h("frank"), h("carol")]
    await gw.decide("txn-acme-0001/finance", h("carol"), "approve")
    assert (await gw.poll(p.txn_id, "finance")).vote["decision"] == "yes"


async def test_at_the_deadline_the_timer_withdraws_and_votes_no_under_HATP_GW_12(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan(decide_by="2026-11-29T10:30:00Z")
    await gw.ask(p, "finance")
    async with anyio.create_task_group() as tg:
        await tg.start(gw.run)
        with anyio.fail_after(5):
            while clock.sleepers == 0:
                await anyio.lowlevel.checkpoint()
        clock.advance(1800)
        with anyio.fail_after(5):
            while gw.store.asks("expired") == []:
                await anyio.lowlevel.checkpoint()
        tg.cancel_scope.cancel()
    ans = await gw.poll(p.txn_id, "finance")
    assert (ans.vote["decision"], ans.vote["code"], ans.approval) == ("no", "DEADLINE_PASSED", None)
    with pytest.raises(HatpError) as e:
        await gw.decide("txn-acme-0001/finance", h("bob"), "approve")
    assert e.value.rule == "HATP-GW-12"


async def test_a_late_decision_after_the_deadline_without_a_timer_is_refused_and_the_expiry_is_kept(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan(decide_by="2026-11-29T10:30:00Z")
    await gw.ask(p, "finance")
    clock.advance(1800)
    with pytest.raises(HatpError) as e:
        await gw.decide("txn-acme-0001/finance", h("bob"), "approve")
    assert e.value.rule == "HATP-GW-12"
    assert gw.store.get("txn-acme-0001/finance").state == "expired"  # type: ignore[union-attr]


async def test_withdraw_cancels_the_pending_ask_and_the_vote_says_withdrawn(gw: GatewayApprover) -> None:
    p = plan()
    await gw.ask(p, "finance")
    await gw.withdraw(p.txn_id, "finance")
    ans = await gw.poll(p.txn_id, "finance")
    assert (ans.vote["decision"], ans.vote["code"]) == ("no", "WITHDRAWN")


async def test_a_choose_ask_is_answered_with_a_signed_answer_and_a_bad_choice_is_never_signed(
    gw: GatewayApprover,
) -> None:
    opts = [{"id": "adlon", "label": "Hotel Adlon"}, {"id": "motel", "label": "Motel One"}]
    await gw.open_question(ask_id="q-hotel", kind="choose", address=h("carol"), question="Which hotel?", options=opts)
    with pytest.raises(HatpError) as e:
        await gw.decide("q-hotel", h("carol"), "answer", "ritz")
    assert e.value.rule == "HATP-ASK-2"
    assert gw.store.get("q-hotel").evidence is None  # type: ignore[union-attr]
    done = await gw.decide("q-hotel", h("carol"), "answer", "motel")
    assert done.evidence is not None and done.evidence["value"] == "motel"
    verify_raw(done.evidence, keyring(), role="gateway")


async def test_no_outgoing_message_contains_a_contact_detail_under_HATP_GW_17(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    notifier = gw.notifier
    assert isinstance(notifier, RecordingNotifier)
    p = plan(address="human://acme.com/frank")
    await gw.ask(p, "finance")
    await gw.ask(plan(txn_id="txn-refused", max_amount="1"), "finance")
    await gw.open_question(ask_id="q-text", kind="text", address=h("alice"), question="Any dietary needs?")
    await gw.decide("q-text", h("alice"), "answer", "none")
    clock.advance(2 * 3600)
    await gw.poll(p.txn_id, "finance")  # frank missed his SLA: carol is asked
    await gw.decide("txn-acme-0001/finance", h("carol"), "approve")
    await gw.poll(p.txn_id, "finance")
    # The notifier did get the private destinations (that is how a person is reached) ...
    assert any(contact for _h, contact, _a in notifier.delivered)
    secrets = [addr for book in contacts().values() for addr in book.values()]
    sent = gw.store.sent()
    kinds = {k for _a, k, _r, _m in sent}
    assert kinds == {"ask", "vote", "hatp.approval", "hatp.answer"}
    # ... but no message that leaves the gateway carries one, nor does any ask handed to the notifier.
    outgoing = [json.dumps(m) for *_x, m in sent] + [json.dumps(a.wire()) for _h, _c, a in notifier.delivered]
    for text in outgoing:
        for secret in secrets:
            assert secret not in text


async def test_the_gateway_refuses_to_sign_with_a_key_without_the_gateway_role_under_HATP_GW_18(
    tmp_path: Path, clock: FakeClock
) -> None:
    with pytest.raises(ValueError, match="gateway"):
        GatewayApprover(
            directory=directory(), key=SigningKey.generate(["participant"]), store=GatewayStore(tmp_path), clock=clock
        )

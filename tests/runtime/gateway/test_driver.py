"""GatewayApprover on a fake clock: signed pending votes, approvals landing, SLA escalation and deadlines by
timer, refusals as signed no votes, and contact details that never leave the gateway."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import anyio
import pytest

from hatp_mcp.core.gated_tools.checks import GateRequirement, call_digest, expected_call
from hatp_mcp.core.gated_tools.gateway_routing import tool_call_ask_id
from hatp_mcp.core.gateway.proof import check_decision_proofs
from hatp_mcp.core.model.evidence import Approval, Vote
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover, RecordingNotifier
from hatp_mcp.store.gateway_store import SqliteGatewayStore, StoredAsk
from tests.acme_org import (
    GATEWAY_ID,
    agent_keys,
    agent_request,
    contacts,
    decide_as,
    directory,
    gateway_key,
    h,
    human_key,
    human_keys,
    keyring,
    plan,
    proof,
    signed_for,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def gw(tmp_path: Path, clock: FakeClock) -> AsyncIterator[GatewayApprover]:
    store = SqliteGatewayStore(tmp_path)
    for human, book in contacts().items():
        for channel, address in book.items():
            store.set_contact(human, channel, address)
    g = GatewayApprover(
        directory=directory(),
        key=gateway_key(),
        store=store,
        clock=clock,
        notifier=RecordingNotifier(),
        agents=agent_keys(),
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
    await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
    assert (await gw.poll(p.txn_id, "finance")).vote["decision"] == "pending"
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
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
        await decide_as(gw, "txn-acme-0001/finance", "dana", "approve")
    assert e.value.rule == "HATP-GW-5"
    assert (await gw.poll(p.txn_id, "finance")).approval is None


async def test_a_requirement_below_the_total_is_answered_with_a_signed_no_vote_naming_HATP_GW_1(
    gw: GatewayApprover,
) -> None:
    ans = await gw.ask(plan(max_amount="100"), "finance")
    verify_raw(ans.vote, keyring(), role="gateway")
    assert (ans.vote["decision"], ans.vote["code"]) == ("no", "HATP-GW-1")


async def _until(done: Callable[[], bool]) -> None:
    """Let the other tasks run until `done()` (bounded: a test never hangs)."""
    with anyio.fail_after(5):
        while not done():
            await anyio.lowlevel.checkpoint()


async def _armed(clock: FakeClock) -> None:
    await _until(lambda: clock.sleepers > 0)


@asynccontextmanager
async def _timer_loop(gw: GatewayApprover, clock: FakeClock) -> AsyncIterator[None]:
    """The gateway's timer loop running, armed on the fake clock; stopped when the block ends."""
    async with anyio.create_task_group() as tg:
        await tg.start(gw.run)
        await _armed(clock)
        yield
        tg.cancel_scope.cancel()


async def test_the_timer_escalates_a_missed_sla_to_the_delegate_under_HATP_GW_10(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    notifier = gw.notifier
    assert isinstance(notifier, RecordingNotifier)
    p = plan(address="human://acme.com/frank")
    await gw.ask(p, "finance")
    assert [d[0] for d in notifier.delivered] == [h("frank")]
    async with _timer_loop(gw, clock):
        clock.advance(2 * 3600)
        await _until(lambda: len(notifier.delivered) >= 2)
    assert [d[0] for d in notifier.delivered] == [h("frank"), h("carol")]
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
    assert (await gw.poll(p.txn_id, "finance")).vote["decision"] == "yes"


async def test_at_the_deadline_the_timer_withdraws_and_votes_no_under_HATP_GW_12(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan(decide_by="2026-11-29T10:30:00Z")
    await gw.ask(p, "finance")
    async with _timer_loop(gw, clock):
        clock.advance(1800)
        await _until(lambda: gw.store.asks("expired") != [])
    ans = await gw.poll(p.txn_id, "finance")
    assert (ans.vote["decision"], ans.vote["code"], ans.approval) == ("no", "DEADLINE_PASSED", None)
    with pytest.raises(HatpError) as e:
        await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
    assert e.value.rule == "HATP-GW-12"


async def test_HATP_GW_97_through_the_gateway_a_late_decision_and_the_no_vote_name_people_and_times_in_words(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan(decide_by="2026-11-29T10:30:00Z")
    await gw.ask(p, "finance")
    clock.advance(1800 + 120)
    with pytest.raises(HatpError) as e:
        await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
    assert e.value.reason == (
        "Bob Brown (human://acme.com/bob) decided at 2026-11-29 10:32 UTC, after the signed deadline"
        " 2026-11-29 10:30 UTC (2 min ago); the ask is withdrawn"
    )
    vote = (await gw.poll(p.txn_id, "finance")).vote
    assert vote["reason"] == "HATP-GW-12: no decision by the signed deadline 2026-11-29 10:30 UTC; asks withdrawn"
    assert verify_raw(vote, keyring(), role="gateway")  # signed as before: only the words changed


async def test_HATP_GW_97_when_everyone_passed_the_gateway_s_no_vote_names_the_last_by_their_card(
    gw: GatewayApprover,
) -> None:
    p = plan(address="human://acme.com/frank")  # frank, then carol, his delegate
    await gw.ask(p, "finance")
    await decide_as(gw, "txn-acme-0001/finance", "frank", "decline")
    await decide_as(gw, "txn-acme-0001/finance", "carol", "decline")
    vote = (await gw.poll(p.txn_id, "finance")).vote
    assert (vote["decision"], vote["code"]) == ("no", "NO_ELIGIBLE_APPROVER")
    assert (
        vote["reason"] == "HATP-GW-15: no eligible person left after Carol Chen (human://acme.com/carol) passed it on"
    )


async def test_a_late_decision_after_the_deadline_without_a_timer_is_refused_and_the_expiry_is_kept(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan(decide_by="2026-11-29T10:30:00Z")
    await gw.ask(p, "finance")
    clock.advance(1800)
    with pytest.raises(HatpError) as e:
        await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
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
        await decide_as(gw, "q-hotel", "carol", "answer", "ritz")
    assert e.value.rule == "HATP-ASK-2"
    assert gw.store.get("q-hotel").evidence is None  # type: ignore[union-attr]
    done = await decide_as(gw, "q-hotel", "carol", "answer", "motel")
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
    await decide_as(gw, "q-text", "alice", "answer", "none")
    clock.advance(2 * 3600)
    await gw.poll(p.txn_id, "finance")  # frank missed his SLA: carol is asked
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
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
            directory=directory(),
            key=SigningKey.generate(["participant"]),
            store=SqliteGatewayStore(tmp_path),
            clock=clock,
        )


async def test_the_approval_carries_each_persons_proof_and_verifies_offline_against_the_cards_under_HATP_GW_27(
    gw: GatewayApprover,
) -> None:
    p = plan()
    await gw.ask(p, "finance")
    await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
    ans = await gw.poll(p.txn_id, "finance")
    assert ans.approval is not None
    approval = Approval.model_validate(ans.approval)
    assert all(d.proof is not None and d.proof.human == d.approver for d in approval.decisions)
    check_decision_proofs(approval, human_keys())


async def test_a_decision_without_a_valid_proof_changes_nothing_under_HATP_GW_19_and_HATP_GW_21(
    gw: GatewayApprover,
) -> None:
    await gw.ask(plan(), "finance")
    before = gw.store.get("txn-acme-0001/finance")
    with pytest.raises(HatpError) as e:
        await gw.decide("txn-acme-0001/finance", {"human": h("bob"), "decision": "approve"})
    assert e.value.rule == "HATP-GW-19"
    forged = {**signed_for(gw.store, "txn-acme-0001/finance", "bob", "reject", gw.clock.now()), "decision": "approve"}
    with pytest.raises(HatpError) as e:
        await gw.decide("txn-acme-0001/finance", forged)
    assert e.value.rule == "HATP-GW-21"
    assert gw.store.get("txn-acme-0001/finance") == before


async def test_a_spent_nonce_stays_spent_when_the_gateway_restarts_under_HATP_GW_26(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    await gw.ask(plan(), "finance")
    raw = signed_for(gw.store, "txn-acme-0001/finance", "bob", "approve", clock.now())
    await gw.decide("txn-acme-0001/finance", raw)
    again = GatewayApprover(
        directory=directory(), key=gateway_key(), store=SqliteGatewayStore(gw.store.path), clock=clock
    )
    with pytest.raises(HatpError) as e:
        await again.decide("txn-acme-0001/finance", raw)
    assert e.value.rule == "HATP-GW-26"
    again.store.close()


async def test_proofs_left_in_the_store_are_verified_on_the_next_sync_and_a_refused_one_never_counts(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan()
    await gw.ask(p, "finance")
    ask_id = "txn-acme-0001/finance"
    gw.store.submit_proof(ask_id, signed_for(gw.store, ask_id, "bob", "approve", clock.now()))
    stale = signed_for(gw.store, ask_id, "carol", "approve", clock.now() - timedelta(minutes=30))
    gw.store.submit_proof(ask_id, stale)
    not_hers = proof(gw.store.get(ask_id).record.ask, "frank", "approve", clock.now(), key=human_key("carol"))  # type: ignore[union-attr]
    gw.store.submit_proof(ask_id, not_hers)
    ans = await gw.poll(p.txn_id, "finance")
    assert ans.vote["decision"] == "pending" and ans.approval is None
    assert [(x.status, x.rule) for x in gw.store.proofs(ask_id)] == [
        ("accepted", None),
        ("refused", "HATP-GW-25"),
        ("refused", "HATP-GW-20"),
    ]
    gw.store.submit_proof(ask_id, signed_for(gw.store, ask_id, "frank", "approve", clock.now()))
    done = await gw.poll(p.txn_id, "finance")
    assert done.vote["decision"] == "yes" and done.approval is not None
    assert [d["approver"] for d in done.approval["decisions"]] == [h("bob"), h("frank")]


async def test_the_timer_loop_lands_a_proof_left_by_the_inbox_within_the_proof_poll_under_HATP_GW_40(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan()
    await gw.ask(p, "finance")
    ask_id = "txn-acme-0001/finance"
    async with _timer_loop(gw, clock):
        # what `hatp inbox approve` does from another process: a signed proof left in the store, nothing else
        gw.store.submit_proof(ask_id, signed_for(gw.store, ask_id, "bob", "approve", clock.now()))
        gw.store.submit_proof(ask_id, signed_for(gw.store, ask_id, "carol", "approve", clock.now()))
        clock.advance(gw.proof_poll.total_seconds())
        await _until(lambda: gw.store.get(ask_id).state == "approved")  # type: ignore[union-attr]
    stored = gw.store.get(ask_id)
    assert stored is not None and stored.evidence is not None and stored.vote is not None
    assert stored.vote["decision"] == "yes"
    assert [q.status for q in gw.store.proofs(ask_id)] == ["accepted", "accepted"]
    assert [k for a, k, _, _ in gw.store.sent() if a == ask_id][-2:] == ["vote", "hatp.approval"]


async def test_a_decline_left_by_the_inbox_escalates_at_once_and_arms_the_next_persons_sla_under_HATP_GW_40(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    notifier = gw.notifier
    assert isinstance(notifier, RecordingNotifier)
    p = plan(address="human://acme.com/frank")
    await gw.ask(p, "finance")
    ask_id = "txn-acme-0001/finance"
    async with _timer_loop(gw, clock):
        gw.store.submit_proof(ask_id, signed_for(gw.store, ask_id, "frank", "decline", clock.now()))
        clock.advance(1)
        await _until(lambda: len(notifier.delivered) >= 2)
        assert [d[0] for d in notifier.delivered] == [h("frank"), h("carol")]  # long before frank's 2 h SLA
        await _armed(clock)
        clock.advance(3600)  # carol's SLA, counted from when the decline landed, runs out: nobody is left
        await _until(lambda: gw.store.get(ask_id).state == "exhausted")  # type: ignore[union-attr]
    stored = gw.store.get(ask_id)
    assert stored is not None and stored.record is not None and stored.vote is not None
    assert [(s.human, s.detail.split(":")[0]) for s in stored.record.seats] == [
        (h("frank"), "declined"),
        (h("carol"), "sla-missed"),
    ]
    assert (stored.vote["decision"], stored.vote["code"]) == ("no", "NO_ELIGIBLE_APPROVER")


async def test_a_refused_proof_left_by_the_inbox_is_settled_by_the_timer_loop_and_never_counts(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    p = plan()
    await gw.ask(p, "finance")
    ask_id = "txn-acme-0001/finance"
    async with _timer_loop(gw, clock):
        gw.store.submit_proof(ask_id, signed_for(gw.store, ask_id, "dana", "approve", clock.now()))
        gw.store.submit_proof("txn-none/finance", signed_for(gw.store, ask_id, "bob", "approve", clock.now()))
        clock.advance(1)
        await _until(lambda: not gw.store.asks_with_proofs("submitted"))
    assert [(q.ask_id, q.status, q.rule) for q in gw.store.proofs()] == [
        (ask_id, "refused", "HATP-GW-5"),
        ("txn-none/finance", "refused", "HATP-GW-22"),
    ]
    assert gw.store.get(ask_id).state == "pending"  # type: ignore[union-attr]


TOOL_REQUIREMENT = GateRequirement.from_config(
    {
        "address": "human://acme.com/role/finance-approver?quorum=2-of-3",
        "requirement": {"action": "travel.spend", "amountFrom": "/amount", "payeeFrom": "/payee"},
    }
)
CHARGE = {"card": "tok_visa_4242", "amount": {"value": "2500.00", "currency": "USD"}, "payee": "acme"}


async def _ask_charge(gw: GatewayApprover) -> StoredAsk:
    digest = call_digest(expected_call("mcp://payments.example", "charge_card", CHARGE, TOOL_REQUIREMENT, None))
    return await gw.ask_tool_call(
        server="mcp://payments.example",
        tool="charge_card",
        arguments=CHARGE,
        requirement=TOOL_REQUIREMENT,
        request=agent_request(digest, gw.clock.now()),
    )


async def test_an_identical_charge_after_the_first_was_approved_opens_a_new_ask_under_HATP_GATE_22(
    gw: GatewayApprover,
) -> None:
    first = await _ask_charge(gw)
    assert (await _ask_charge(gw)).ask_id == first.ask_id  # idempotent while pending
    await decide_as(gw, first.ask_id, "bob", "approve")
    await decide_as(gw, first.ask_id, "alice", "approve")
    approved = await gw.current(first.ask_id)
    assert approved.state == "approved" and approved.evidence is not None
    notified = len(gw.notifier.delivered)  # type: ignore[attr-defined]

    second = await _ask_charge(gw)  # its approval may be spent already: never handed out again

    assert second.ask_id == first.ask_id + ".2"
    assert (second.state, second.evidence) == ("pending", None)
    assert second.record is not None and second.record.ask.plan_digest == first.record.ask.plan_digest  # type: ignore[union-attr]
    assert len(gw.notifier.delivered) > notified  # type: ignore[attr-defined]  # the humans are asked again
    assert (await _ask_charge(gw)).ask_id == second.ask_id  # and that one is idempotent while pending
    assert await gw.current(first.ask_id) == approved  # the first ask keeps its decision and approval


async def test_an_identical_charge_after_the_first_ask_expired_opens_a_new_ask_under_HATP_GATE_22(
    gw: GatewayApprover, clock: FakeClock
) -> None:
    first = await _ask_charge(gw)
    clock.advance(3600)  # the ask's decide window (an hour) passes with nobody deciding
    second = await _ask_charge(gw)
    assert (await gw.current(first.ask_id)).state == "expired"
    assert (second.ask_id, second.state) == (first.ask_id + ".2", "pending")
    assert second.record is not None and second.record.ask.decide_by == "2026-11-29T12:00:00Z"


async def test_HATP_ASK_7_a_question_stored_under_a_tool_calls_ask_id_is_refused_not_handed_out(
    gw: GatewayApprover,
) -> None:
    digest = call_digest(expected_call("mcp://payments.example", "charge_card", CHARGE, TOOL_REQUIREMENT, None))
    squat = tool_call_ask_id(digest)
    asked = await gw.open_question(ask_id="q-legacy", kind="text", address=h("alice"), question="Any needs?")
    assert asked.record is not None  # a store written before HATP-ASK-7 kept questions out of that namespace:
    rec = asked.record.model_copy(update={"ask": asked.record.ask.model_copy(update={"ask_id": squat})})
    gw.store.create(StoredAsk(squat, rec.state, rec, None, None))
    with pytest.raises(HatpError) as e:
        await _ask_charge(gw)
    assert (e.value.rule, e.value.code) == ("HATP-ASK-7", "ASK_ID_RESERVED")


async def test_HATP_GW_9_the_next_ask_goes_to_the_person_with_fewer_live_open_asks(gw: GatewayApprover) -> None:
    address = "human://acme.com/role/finance-approver"

    def asked(txn_id: str) -> list[str]:
        stored = gw.store.get(f"{txn_id}/finance")
        assert stored is not None and stored.record is not None
        return [s.human for s in stored.record.seats if s.status == "asked"]

    await gw.ask(plan(["100"], address=address, txn_id="txn-load-1"), "finance")
    await gw.ask(plan(["100"], address=address, txn_id="txn-load-2"), "finance")
    await gw.ask(plan(["100"], address=address, txn_id="txn-load-3"), "finance")
    # on their cards all have 1 of 10 open; bob and erin decide in 30 min: bob by id, then erin, whose live asks
    # are fewer, then alice (load ranks before the SLA: she has none open here yet)
    assert [asked(t) for t in ("txn-load-1", "txn-load-2", "txn-load-3")] == [[h("bob")], [h("erin")], [h("alice")]]
    assert gw.open_asks() == {h("bob"): 1, h("erin"): 1, h("alice"): 1}


async def test_HATP_GW_9_questions_count_and_respect_the_live_open_asks_too(gw: GatewayApprover) -> None:
    address = "human://acme.com/role/finance-approver"
    await gw.ask(plan(["100"], address=address, txn_id="txn-load-q"), "finance")  # bob: one open ask
    asked = await gw.open_question(ask_id="q-load-1", kind="text", address=address, question="Which cost centre?")
    assert asked.record is not None
    assert [s.human for s in asked.record.seats if s.status == "asked"] == [h("erin")]
    assert gw.open_asks() == {h("bob"): 1, h("erin"): 1}

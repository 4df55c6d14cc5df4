"""The Deliverer on a fake clock against real webhook receivers on loopback: retries with backoff, the next channel,
an unreachable person handed on and signed as excluded (HATP-GW-61, HATP-GW-64), reminders and closing notices
(HATP-GW-62), and a restart that neither loses nor doubles a notice (HATP-GW-63)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import pytest

from hatp_mcp.core.gateway.notice import Notice
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.delivery.channels import ChatChannel, Sender, SmsChannel
from hatp_mcp.runtime.gateway.delivery.settings import DeliverySettings, WebhookSettings
from hatp_mcp.runtime.gateway.delivery.worker import Deliverer
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.deliveries import DeliveryStore
from tests.acme_org import decide_as, h, plan
from tests.mcp.gateway_fixture import make_gateway
from tests.runtime.gateway.delivery.receivers import Hook, webhook_receiver

pytestmark = pytest.mark.anyio

INBOX = "http://localhost:8400"
FRANK = "human://acme.com/frank"  # card channels: inbox, sms, chat; delegate: carol (chat)
SETTINGS = DeliverySettings(
    attempts_per_channel=3, backoff_seconds=30, max_backoff_seconds=600, remind_before_seconds=900
)


@pytest.fixture
def hooks() -> Iterator[dict[str, Hook]]:
    with ExitStack() as stack:
        yield {kind: stack.enter_context(webhook_receiver(f"{kind}-secret")) for kind in ("sms", "chat")}


def senders(hooks: dict[str, Hook], clock: FakeClock) -> dict[str, Sender]:
    return {
        "sms": SmsChannel(WebhookSettings(hooks["sms"].url, "sms-secret", "+15550100"), clock, timeout=5),
        "chat": ChatChannel(WebhookSettings(hooks["chat"].url, "chat-secret"), clock, timeout=5),
    }


def deliverer(gw: GatewayApprover, data: Path, hooks: dict[str, Hook], clock: FakeClock) -> Deliverer:
    d = Deliverer(
        gateway=gw,
        outbox=DeliveryStore(data),
        senders=senders(hooks, clock),
        settings=SETTINGS,
        inbox_url=INBOX,
        clock=clock,
    )
    gw.notifier = d
    return d


async def run_until_quiet(d: Deliverer, clock: FakeClock, until: datetime | None = None) -> list[str]:
    """Step the deliverer, moving the fake clock to each next due time, until nothing is due (bounded)."""
    times = []
    with anyio.fail_after(20):
        for _ in range(50):
            wake = await d.step()
            if wake is None or (until is not None and wake >= until):
                return times
            clock.set(max(wake, clock.now()))
            times.append(clock.now().strftime("%H:%M:%S"))
    raise AssertionError("the deliverer never went quiet")


async def test_HATP_GW_64_a_failing_channel_is_retried_with_backoff_then_the_next_channel_delivers(
    tmp_path: Path, clock: FakeClock, hooks: dict[str, Hook]
) -> None:
    gw = make_gateway(tmp_path, clock)
    d = deliverer(gw, tmp_path, hooks, clock)
    hooks["sms"].statuses = [500, 503, 500]
    await gw.ask(plan(address=FRANK), "finance")
    times = await run_until_quiet(d, clock, until=clock.now() + timedelta(hours=1))
    assert times == ["10:00:30", "10:01:30"]  # 30 s, then 60 s; the third sms fails and chat is tried at once
    (row,) = d.outbox.all()
    assert (row.state, row.sent_via, row.failures) == (
        "sent",
        "chat",
        ["sms: HTTP 500", "sms: HTTP 503", "sms: HTTP 500"],
    )
    (body,) = hooks["chat"].received
    assert body["channel"] == "chat-id-U0FRANK42" and hooks["sms"].received == []
    assert "+49-555-0199-frank" not in str(row)  # no address in the delivery record


async def test_HATP_GW_61_a_person_no_channel_reaches_is_excluded_in_the_signed_routing_and_the_next_is_asked(
    tmp_path: Path, clock: FakeClock, hooks: dict[str, Hook]
) -> None:
    gw = make_gateway(tmp_path, clock)
    d = deliverer(gw, tmp_path, hooks, clock)
    hooks["sms"].statuses = [500] * 3
    hooks["chat"].statuses = [500] * 3  # then carol's chat notice goes through
    await gw.ask(plan(address=FRANK), "finance")
    await run_until_quiet(d, clock, clock.now() + timedelta(minutes=30))
    stored = gw.store.get("txn-acme-0001/finance")
    assert stored is not None and stored.record is not None
    seats = {s.human: (s.status, s.rule, s.detail) for s in stored.record.seats}
    assert seats[FRANK] == ("excluded", "HATP-GW-61", "unreachable: every channel failed (chat, sms)")
    assert seats[h("carol")][0] == "asked"
    assert [b["channel"] for b in hooks["chat"].received] == ["chat-id-U0CAROL77"]
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
    approval = (await gw.poll("txn-acme-0001", "finance")).approval
    assert approval is not None
    routed = {r["human"]: r for r in approval["routing"]["humans"]}
    assert (routed[FRANK]["status"], routed[FRANK]["rule"]) == ("excluded", "HATP-GW-61")
    failed = next(r for r in d.outbox.all() if r.notice.human == FRANK)
    assert failed.state == "failed" and len(failed.failures) == 6


async def test_HATP_GW_63_a_gateway_restarted_mid_delivery_sends_what_was_queued_once_and_never_again(
    tmp_path: Path, clock: FakeClock, hooks: dict[str, Hook]
) -> None:
    gw = make_gateway(tmp_path, clock)
    first = deliverer(gw, tmp_path, hooks, clock)
    await gw.ask(plan(address=FRANK), "finance")  # queued durably; the process stops before sending
    first.outbox.close()
    soon = clock.now() + timedelta(hours=1)  # before the reminder
    again = deliverer(gw, tmp_path, hooks, clock)  # the restarted gateway's deliverer, same data dir
    await run_until_quiet(again, clock, soon)
    again.outbox.close()
    third = deliverer(gw, tmp_path, hooks, clock)  # and once more: what is marked sent is not sent again
    await run_until_quiet(third, clock, soon)
    await gw.ask(plan(address=FRANK), "finance")  # the coordinator asking again changes nothing
    await run_until_quiet(third, clock, soon)
    assert len(hooks["sms"].received) == 1 and hooks["sms"].keys == [f"txn-acme-0001/finance|{FRANK}|ask"]
    assert [r.state for r in third.outbox.all()] == ["sent"]


async def test_HATP_GW_62_a_reminder_comes_before_the_sla_runs_out_and_a_withdrawal_is_told(
    tmp_path: Path, clock: FakeClock, hooks: dict[str, Hook]
) -> None:
    gw = make_gateway(tmp_path, clock)
    d = deliverer(gw, tmp_path, hooks, clock)
    await gw.ask(plan(address=FRANK), "finance")  # frank's SLA: 2 h, due 12:00; reminder 15 min before
    wake = await d.step()
    assert wake is not None and wake.strftime("%H:%M") == "11:45"
    clock.set(wake)
    await d.step()
    await gw.withdraw("txn-acme-0001", "finance")
    await d.step()
    texts = [b["body"] for b in hooks["sms"].received]
    assert [t.split(":")[0] for t in texts] == ["Approval needed", "Reminder", "No longer waiting for you"]
    assert all(t.endswith("/asks/txn-acme-0001%2Ffinance") for t in texts)


async def test_HATP_GW_62_people_told_of_an_ask_decided_by_others_hear_it_closed_and_the_deciders_do_not(
    tmp_path: Path, clock: FakeClock, hooks: dict[str, Hook]
) -> None:
    gw = make_gateway(tmp_path, clock)
    d = deliverer(gw, tmp_path, hooks, clock)
    await gw.ask(plan(), "finance")  # 2 of bob (inbox only), carol (chat), frank (sms)
    await d.step()
    await decide_as(gw, "txn-acme-0001/finance", "bob", "approve")
    await decide_as(gw, "txn-acme-0001/finance", "carol", "approve")
    await d.step()
    assert [b["channel"] for b in hooks["chat"].received] == ["chat-id-U0CAROL77"]  # carol decided: no closing
    assert [b["body"].split(":")[0] for b in hooks["sms"].received] == ["Approval needed", "No longer waiting for you"]
    states = {(r.notice.human, r.notice.kind): r.state for r in d.outbox.all()}
    assert states[(h("bob"), "ask")] == "inbox"  # no push channel on bob's card: the ask waits in his inbox
    assert states[(h("carol"), "closed")] == "skipped" and states[(FRANK, "closed")] == "sent"
    assert d.outbox.open_asks() == []  # nothing more owed: the closed ask is not scanned again


async def test_a_reminder_for_someone_the_ask_moved_past_is_dropped_not_sent(
    tmp_path: Path, clock: FakeClock, hooks: dict[str, Hook]
) -> None:
    gw = make_gateway(tmp_path, clock)
    d = deliverer(gw, tmp_path, hooks, clock)
    await gw.ask(plan(address=FRANK), "finance")
    await d.step()
    clock.set(clock.now() + timedelta(hours=1, minutes=45))
    d.outbox.enqueue(  # a reminder queued, and then frank declines before it goes out
        __import__("hatp_mcp.core.gateway.notice", fromlist=["render_notice"]).render_notice(
            gw.store.get("txn-acme-0001/finance").record,
            FRANK,
            "reminder",
            INBOX,  # type: ignore[union-attr]
        ),
        clock.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    await decide_as(gw, "txn-acme-0001/finance", "frank", "decline")
    await d.step()
    states = {r.notice.kind: r.state for r in d.outbox.all() if r.notice.human == FRANK}
    assert states["reminder"] == "dropped" and len(hooks["sms"].received) == 1


class _StuckSms:
    """An sms gateway that takes every message and answers none of them until the test lets it."""

    kind = "sms"

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.waiting: list[str] = []

    async def send(self, address: str, notice: Notice) -> None:
        self.waiting.append(notice.human)
        await self.release.wait()


class _Told:
    """A channel that says when it has delivered a message."""

    def __init__(self, inner: Sender) -> None:
        self.kind = inner.kind
        self.inner = inner
        self.delivered = anyio.Event()

    async def send(self, address: str, notice: Notice) -> None:
        await self.inner.send(address, notice)
        self.delivered.set()


async def test_HATP_GW_83_one_persons_stuck_channel_does_not_hold_back_another_persons_notice(
    tmp_path: Path, clock: FakeClock, hooks: dict[str, Hook]
) -> None:
    gw = make_gateway(tmp_path, clock)
    d = deliverer(gw, tmp_path, hooks, clock)
    stuck, chat = _StuckSms(), _Told(d.senders["chat"])
    d.senders.update(sms=stuck, chat=chat)
    await gw.ask(plan(address=FRANK), "finance")  # frank's notice is claimed first: his sms never answers
    await gw.ask(plan(address=h("carol"), txn_id="txn-acme-0002"), "finance")  # carol's goes by chat
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(d.step)
            await chat.delivered.wait()  # carol is told while frank's sms still hangs
            assert stuck.waiting == [FRANK] and not stuck.release.is_set()
            stuck.release.set()
    states = {row.notice.human: (row.state, row.sent_via) for row in d.outbox.all()}
    assert states == {FRANK: ("sent", "sms"), h("carol"): ("sent", "chat")}
    assert [b["channel"] for b in hooks["chat"].received] == ["chat-id-U0CAROL77"]

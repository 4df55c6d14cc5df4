"""Two gateways on one store (issues #15 and #17): two GatewayApprover runtimes, each with its own connection and
its own Deliverer, on one gateway store (a SQLite file; a PostgreSQL database), a fake clock moved past an SLA.
Whatever the interleaving, the escalation is recorded once, the person escalated to is told once, and each notice
is delivered once (spec/gateway.md HATP-GW-76..79)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import anyio
import pytest

from hatp_mcp.core.gateway.notice import Notice
from hatp_mcp.core.model.gateway import Ask
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.delivery.channels import DeliveryFailed, Sender
from hatp_mcp.runtime.gateway.delivery.worker import Deliverer
from hatp_mcp.runtime.gateway.driver import GatewayApprover, RecordingNotifier
from hatp_mcp.store.url import open_gateway_store
from tests.acme_org import agent_keys, contacts, directory, gateway_key, h, plan
from tests.runtime.gateway.delivery.receivers import Hook, webhook_receiver
from tests.runtime.gateway.delivery.test_worker import SETTINGS, senders
from tests.store.conftest import Backend, backend  # noqa: F401 (the both-backend fixture)
from tests.store.test_deliveries import delivery_queue

pytestmark = pytest.mark.anyio

FRANK = "human://acme.com/frank"  # SLA 2 h, then his delegate carol
INBOX = "http://localhost:8400"


@pytest.fixture
def hooks() -> Iterator[dict[str, Hook]]:
    with ExitStack() as stack:
        yield {kind: stack.enter_context(webhook_receiver(f"{kind}-secret")) for kind in ("sms", "chat")}


class HeldNotifier(RecordingNotifier):
    """A notifier that does IO (as a push notifier does): its first notice waits until the test lets it go."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = anyio.Event()
        self.release = anyio.Event()

    async def notify(self, human: str, contact: dict[str, str], ask: Ask) -> None:
        if not self.entered.is_set():
            self.entered.set()
            await self.release.wait()
        await super().notify(human, contact, ask)


def gateway(backend: Backend, clock: FakeClock, owner: str) -> GatewayApprover:  # noqa: F811
    """One gateway process's runtime: its own connection to the shared store."""
    store = backend.closing(open_gateway_store(backend.url("gateway")))
    for human, book in contacts().items():
        for channel, address in book.items():
            store.set_contact(human, channel, address)
    return GatewayApprover(
        directory=directory(), key=gateway_key(), store=store, clock=clock, agents=agent_keys(), owner=owner
    )


class StalledSms:
    """An sms sender that stalls mid-send (a process paused while its request is out) until let go, then fails."""

    kind = "sms"

    def __init__(self) -> None:
        self.sending = anyio.Event()
        self.release = anyio.Event()
        self.sent: list[str] = []

    async def send(self, address: str, notice: Notice) -> None:
        self.sending.set()
        await self.release.wait()
        self.sent.append(notice.key)
        raise DeliveryFailed("HTTP 504")


def deliverer(
    gw: GatewayApprover,
    backend: Backend,  # noqa: F811
    hooks: dict[str, Hook],
    clock: FakeClock,
    lease_seconds: float | None = None,
    sms: Sender | None = None,
) -> Deliverer:
    chosen = senders(hooks, clock)
    if sms is not None:
        chosen["sms"] = sms
    d = Deliverer(
        gateway=gw,
        outbox=delivery_queue(backend),
        senders=chosen,
        settings=SETTINGS,
        inbox_url=INBOX,
        clock=clock,
        lease_seconds=lease_seconds,
    )
    gw.notifier = d
    return d


async def test_HATP_GW_76_HATP_GW_77_two_gateways_past_an_sla_escalate_once_and_tell_the_delegate_once(
    backend: Backend,  # noqa: F811
    clock: FakeClock,
) -> None:
    a, b = gateway(backend, clock, "gw-a"), gateway(backend, clock, "gw-b")
    held, told = HeldNotifier(), RecordingNotifier()
    a.notifier, b.notifier = held, told
    for n in (1, 2):  # two asks of frank's, both past his SLA at once
        await b.ask(plan(address=FRANK, txn_id=f"txn-two-{n}"), "finance")
    told.delivered.clear()
    clock.advance(2 * 3600 + 60)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(a.fire_due)  # escalates the first ask, then waits in its notifier (sending)
            await held.entered.wait()
            await b.fire_due()  # meanwhile the other gateway looks at the same asks
            held.release.set()
    told_carol = [(ask.ask_id, who) for who, _c, ask in [*held.delivered, *told.delivered]]
    assert sorted(told_carol) == [("txn-two-1/finance", h("carol")), ("txn-two-2/finance", h("carol"))]
    logged = [(ask_id, r) for ask_id, kind, r, _m in a.store.sent() if kind == "ask" and r == h("carol")]
    assert sorted(logged) == sorted(told_carol)
    for n in (1, 2):
        stored = a.store.get(f"txn-two-{n}/finance")
        assert stored is not None and stored.record is not None
        missed = [s for s in stored.record.seats if s.human == FRANK]
        assert [s.status for s in missed] == ["excluded"]
        steps = a.store.timer_steps(f"txn-two-{n}/finance")
        assert len(steps) == 1 and steps[0].owner in ("gw-a", "gw-b")  # one step, taken by one of them


async def test_HATP_GW_78_two_gateways_delivering_from_one_queue_send_each_notice_once(
    backend: Backend,  # noqa: F811
    clock: FakeClock,
    hooks: dict[str, Hook],
) -> None:
    a, b = gateway(backend, clock, "gw-a"), gateway(backend, clock, "gw-b")
    da, db = deliverer(a, backend, hooks, clock), deliverer(b, backend, hooks, clock)
    await a.ask(plan(address=FRANK), "finance")  # frank's notice queued by the gateway that routed the ask
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(da.step)
            tg.start_soon(db.step)
    assert hooks["sms"].keys == [f"txn-acme-0001/finance|{FRANK}|ask"]
    (row,) = da.outbox.all()
    assert row.state == "sent"


async def test_HATP_GW_79_a_gateway_stalled_mid_send_loses_its_lapsed_claim_to_one_other_and_its_late_outcome(
    backend: Backend,  # noqa: F811
    clock: FakeClock,
    hooks: dict[str, Hook],
) -> None:
    a, b, c = (gateway(backend, clock, f"gw-{n}") for n in "abc")
    stalled = StalledSms()
    da = deliverer(a, backend, hooks, clock, lease_seconds=0, sms=stalled)  # its claims lapse at once
    db, dc = deliverer(b, backend, hooks, clock), deliverer(c, backend, hooks, clock)
    await a.ask(plan(address=FRANK), "finance")
    key = f"txn-acme-0001/finance|{FRANK}|ask"
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(da.step)
            await stalled.sending.wait()  # gw-a is mid-send, its lease lapsed
            await db.step()  # gw-b takes the delivery over (epoch 2) and sends it
            await dc.step()  # gw-c finds it sent (or held): nothing
            stalled.release.set()  # gw-a's send completes late; its outcome is refused (CLAIM_LOST), not recorded
    assert hooks["sms"].keys == [key] and stalled.sent == [key]  # the one resend HATP-GW-63 allows, same key
    (row,) = dc.outbox.all()
    assert (row.state, row.sent_via, row.failures) == ("sent", "sms", [])  # gw-a's late failure recorded nowhere
    assert hooks["chat"].received == []  # and it never moved the notice on to the next channel

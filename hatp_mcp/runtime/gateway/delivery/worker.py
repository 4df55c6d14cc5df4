"""The Deliverer: the gateway's durable delivery loop (spec/gateway.md HATP-GW-61..64), on the gateway's Clock.

It is the gateway's Notifier (a person newly asked is queued at once) and runs beside the gateway's timers:
- what each ask owes is the core's (core/gateway/notice.py): `ask` to everyone asked, a `reminder` before their SLA
  runs out, `closed` when the ask was withdrawn, decided by someone else, expired, or handed on;
- every notice is queued durably before anything is sent, under its idempotency key (ask, person, kind), and is
  marked sent only after its channel accepted it: a gateway restarted mid-delivery sends what it had not sent
  (again under the same key, so a receiver can drop a resend of a message it got just before the crash: that is
  the one case it may arrive twice) and never sends again what it marked sent (HATP-GW-63);
- a person's channels are the push channels their signed card lists (email, chat, sms), in the card's order,
  those the gateway has settings for and an address for; an attempt that fails is retried on the same channel
  with exponential backoff (`backoffSeconds` doubling, at most `maxBackoffSeconds`) up to `attemptsPerChannel`
  times, then the next channel is tried (HATP-GW-64);
- a person no channel reached is unavailable: the gateway excludes them with HATP-GW-61 (the failed channel kinds,
  never an address, in the signed routing record) and the escalation moves on to the next person. A person whose
  card lists no push channel is not pushed to (delivery `inbox`): the ask waits in their inbox, and their SLA
  hands it on if they do not come.
- several gateway processes may share one queue (spec/gateway.md HATP-GW-78/79): an attempt is made only by the
  process that claimed the delivery (owner id, epoch, lease on the database's clock) and its outcome is recorded
  only while that claim holds; a claim whose process died mid-send lapses after its lease and is taken over once,
  the notice sent again under the same key. The loop also looks again every lease (work another process queued,
  or left when it died);
- attempts for different people run side by side, at most `concurrentSends` at once, one person's in order
  (HATP-GW-83): one hanging channel delays only the person it is trying to reach.
Contact addresses are read from the gateway's contacts table at send time only; they are never stored here,
never logged, never put in a notice.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import anyio
from anyio.abc import TaskStatus

from hatp_mcp.core.gateway.notice import NoticeKind, due_notices, next_reminder, render_notice
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.gateway import Ask
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.gateway.delivery.channels import DeliveryFailed, Sender
from hatp_mcp.runtime.gateway.delivery.settings import DeliverySettings
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.deliveries import Claim, DeliveryQueue

__all__ = ["PUSH_KINDS", "Deliverer"]

PUSH_KINDS = ("email", "chat", "sms")


class Deliverer:
    def __init__(
        self,
        *,
        gateway: GatewayApprover,
        outbox: DeliveryQueue,
        senders: dict[str, Sender],
        settings: DeliverySettings,
        inbox_url: str,
        clock: Clock,
        lease_seconds: float | None = None,
    ) -> None:
        self.gateway = gateway
        self.outbox = outbox
        # How long a claim on an attempt lasts (HATP-GW-78): past any send's timeout, so a live sender keeps it.
        self.lease_seconds = (
            lease_seconds if lease_seconds is not None else max(60.0, 4 * settings.send_timeout_seconds)
        )
        self.senders = senders
        self.settings = settings
        self.inbox_url = inbox_url
        self.clock = clock
        self._wake = anyio.Event()

    # -- the Notifier protocol (runtime/gateway/driver.py) ---------------------------------------------------------

    async def notify(self, human: str, contact: dict[str, str], ask: Ask) -> None:
        """A person was newly asked: queue their notice now (durable), the loop sends it. `contact` is not kept."""
        stored = self.gateway.store.get(ask.ask_id)
        if stored is not None and stored.record is not None:
            self._queue(stored.record.ask.ask_id, [(human, "ask")])
        self._wake.set()

    # -- the loop --------------------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Queue what the asks owe, send what is due, wait for the next due time, a change, or a lease (what other
        processes queued or left); forever. Started once its first step is done."""
        started = False
        while True:
            self._wake = anyio.Event()
            changed = self.gateway.next_change()
            wake = await self.step()
            if not started:
                started = True
                task_status.started()
            again = self.clock.now() + timedelta(seconds=max(self.lease_seconds, 1.0))
            wake = again if wake is None else min(wake, again)
            async with anyio.create_task_group() as tg:

                async def until(event: anyio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()

                async def timer(at: datetime) -> None:
                    await self.clock.sleep_until(at)
                    tg.cancel_scope.cancel()

                tg.start_soon(until, self._wake)
                tg.start_soon(until, changed)
                tg.start_soon(timer, wake)

    async def step(self) -> datetime | None:
        """One pass: queue owed notices, send the due ones. Returns when the next one is due (None: on a change)."""
        now = self.clock.now()
        wake = self._scan(now)
        for _ in range(8):  # a failed channel hands its notice to the next one at once: send that too
            ready = self.outbox.claim_due(format_ts(now), self.gateway.owner, self.lease_seconds)
            if not ready:
                break
            await self._attempt_all(ready)
        due = self.outbox.next_due()
        times = [t for t in (wake, parse_ts(due) if due else None) if t is not None]
        return min(times, default=None)

    async def _attempt_all(self, ready: list[Claim]) -> None:
        """HATP-GW-83: one person's notices in claim order, different people's side by side, at most
        `concurrent_sends` attempts at once: a channel that hangs (until its send timeout) holds back only the
        person it is trying to reach."""
        by_person: dict[str, list[Claim]] = {}
        for claim in ready:
            by_person.setdefault(claim.delivery.notice.human, []).append(claim)
        limiter = anyio.CapacityLimiter(self.settings.concurrent_sends)

        async def in_order(claims: list[Claim]) -> None:
            for claim in claims:
                async with limiter:
                    try:
                        await self._attempt(claim)
                    except HatpError as exc:  # HATP-GW-79: our lease lapsed mid-attempt; the new holder's counts
                        if exc.code != "CLAIM_LOST":
                            raise

        async with anyio.create_task_group() as tg:
            for claims in by_person.values():
                tg.start_soon(in_order, claims)

    def _scan(self, now: datetime) -> datetime | None:
        remind = timedelta(seconds=self.settings.remind_before_seconds)
        ids = {s.ask_id for s in self.gateway.store.asks("pending")} | set(self.outbox.open_asks())
        wake: datetime | None = None
        for ask_id in sorted(ids):
            stored = self.gateway.store.get(ask_id)
            if stored is None or stored.record is None:
                continue
            sent = self.outbox.kinds_for(ask_id)
            self._queue(ask_id, due_notices(stored.record, sent, remind, now))
            if stored.record.state != "pending":  # closed: whoever was told and is owed nothing more is done
                sent = self.outbox.kinds_for(ask_id)
                done: list[tuple[str, NoticeKind]] = [(h, "closed") for h, k in sent if k == "ask"]
                self._queue(ask_id, [d for d in done if d not in sent], state="skipped")
            at = next_reminder(stored.record, self.outbox.kinds_for(ask_id), remind)
            if at is not None and at > now and (wake is None or at < wake):
                wake = at
        return wake

    def _queue(self, ask_id: str, owed: list[tuple[str, NoticeKind]], state: str = "queued") -> None:
        stored = self.gateway.store.get(ask_id)
        if stored is None or stored.record is None:
            return
        at = self.clock.now()
        now = format_ts(at)
        names = {card.id: card.display_name for card in self.gateway.directory.cards()}  # HATP-GW-88
        for human, kind in owed:
            seat = next((s for s in stored.record.seats if s.human == human), None)
            due_at = seat.due_at if seat is not None else None
            notice = render_notice(stored.record, human, kind, self.inbox_url, due_at, names=names, now=at)
            self.outbox.enqueue(notice, now, state)

    def channels_for(self, human: str) -> list[str]:
        """The push channels to try for `human`: on their signed card, in its order, configured here, addressed."""
        card = self.gateway.directory.card(human)
        if card is None:
            return []
        book = self.gateway.store.contacts_for(human)
        kinds = [c.type for c in card.channels if c.type in PUSH_KINDS]
        return [k for k in dict.fromkeys(kinds) if k in self.senders and k in book]

    async def _attempt(self, claim: Claim) -> None:
        """One attempt on a delivery this process claimed. Raises HatpError HATP-GW-79 when the claim was lost."""
        d = claim.delivery
        notice, now = d.notice, self.clock.now()
        if notice.kind != "ask" and self._superseded(claim):
            self.outbox.settle(claim, state="dropped", channel=d.channel, attempt=d.attempt, next_at=d.next_at)
            return
        channels = self.channels_for(notice.human)
        if not channels:
            self.outbox.settle(claim, state="inbox", channel=0, attempt=0, next_at=d.next_at)
            return
        index = d.channel
        if index >= len(channels):  # the card lost a channel since: everything it still lists was tried
            await self._unreachable(claim, d.failures)
            return
        kind = channels[index]
        address = self.gateway.store.contacts_for(notice.human).get(kind)
        try:
            if address is None:
                raise DeliveryFailed("no address")
            await self.senders[kind].send(address, notice)
        except DeliveryFailed as exc:
            failures = [*d.failures, f"{kind}: {exc}"][-20:]
            attempt = d.attempt + 1
            if attempt < self.settings.attempts_per_channel:
                wait = min(self.settings.backoff_seconds * 2 ** (attempt - 1), self.settings.max_backoff_seconds)
                at = format_ts(now + timedelta(seconds=wait))
                self.outbox.settle(claim, state="queued", channel=index, attempt=attempt, next_at=at, failures=failures)
            elif index + 1 < len(channels):
                self.outbox.settle(
                    claim, state="queued", channel=index + 1, attempt=0, next_at=format_ts(now), failures=failures
                )
            else:
                await self._unreachable(claim, failures, index)
            return
        self.outbox.settle(
            claim,
            state="sent",
            channel=index,
            attempt=d.attempt + 1,
            next_at=d.next_at,
            sent_via=kind,
            failures=d.failures,  # the failed attempts before it stay on record
        )

    def _superseded(self, claim: Claim) -> bool:
        """A reminder for someone no longer asked (or an ask that closed) is not sent."""
        d = claim.delivery
        if d.notice.kind != "reminder":
            return False
        stored = self.gateway.store.get(d.notice.ask_id)
        if stored is None or stored.record is None or stored.record.state != "pending":
            return True
        return not any(s.human == d.notice.human and s.status == "asked" for s in stored.record.seats)

    async def _unreachable(self, claim: Claim, failures: list[str], index: int | None = None) -> None:
        d = claim.delivery
        notice = d.notice
        self.outbox.settle(  # fenced first: only the claim's holder hands the person on
            claim,
            state="failed",
            channel=index if index is not None else d.channel,
            attempt=d.attempt,
            next_at=d.next_at,
            failures=failures,
        )
        if notice.kind == "ask":
            kinds = sorted({f.split(":", 1)[0] for f in failures})
            detail = f"unreachable: every channel failed ({', '.join(kinds)})"
            await self.gateway.unreachable(notice.ask_id, notice.human, detail)

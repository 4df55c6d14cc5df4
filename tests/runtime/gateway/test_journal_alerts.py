"""A dead letter sent through the gateway's delivery channels (HATP-JRN-16) to the people a role names, against
the delivery tests' real loopback receivers: email over SMTP to aiosmtpd, chat as a signed webhook. The notice
names the saga, step, tool, attempts, key and error, never an argument or output value nor a contact detail;
a dead letter that reached nobody stays unalerted and is sent again, under the same key, when the journal next
opens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.journal.alert import dead_letter_key
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.delivery.channels import ChatChannel, EmailChannel, Sender
from hatp_mcp.runtime.gateway.delivery.settings import EmailSettings, WebhookSettings
from hatp_mcp.runtime.gateway.journal_alerts import DeliveredAlert
from hatp_mcp.runtime.journal.driver import Journal, SagaRollbackFailed
from hatp_mcp.runtime.journal.undoable import UndoRefused, undoable
from hatp_mcp.store.journal_store import SqliteJournalStore
from tests.acme_org import NAMES, card_doc, h, resigned, well_known
from tests.runtime.gateway.delivery.receivers import Hook, Mailbox, smtp_receiver, webhook_receiver

pytestmark = pytest.mark.anyio

KEY = SigningKey.generate(["journal"], kid="journal-alert-test")
ROLE = "human://acme.com/role/security-leads"  # bob, carol and frank
CONTACTS = json.loads((Path(__file__).resolve().parents[3] / "spec/fixtures/org/contacts.json").read_text())
SECRET_ARG = "tok_visa_4242"
SECRET_OUT = "RF-PRIVATE-7731"


def directory() -> Directory:
    """bob is reached by email, carol by chat; frank's card lists the inbox only."""
    changed = {
        "bob": resigned("bob", channels=[{"type": "email"}, {"type": "inbox"}]),
        "carol": resigned("carol", channels=[{"type": "chat"}, {"type": "inbox"}]),
        "frank": resigned("frank", channels=[{"type": "inbox"}]),
    }
    d, ignored = Directory.load(well_known(), [changed.get(n) or card_doc(n) for n in NAMES])
    assert not ignored
    return d


def senders(box: Mailbox, hook: Hook, clock: FakeClock) -> dict[str, Sender]:
    return {
        "email": EmailChannel(EmailSettings("127.0.0.1", box.port, "journal@acme.example"), timeout=5),
        "chat": ChatChannel(WebhookSettings(hook.url, hook.secret), clock, timeout=5),
    }


async def charge(args: dict[str, Any], key: str) -> Any:
    return {"refund": SECRET_OUT}


async def refuse(args: dict[str, Any], output: Any, key: str) -> Any:
    raise UndoRefused("the payments API says the charge settled")


CHARGE = undoable("charge", charge, refuse)


async def fail_a_saga(journal: Journal) -> SagaRollbackFailed:
    with pytest.raises(SagaRollbackFailed) as failed:
        async with journal.saga("pay-for-882", "saga-alert") as saga:
            await saga.run(CHARGE, {"card": SECRET_ARG, "usd": "40.00"})
            raise RuntimeError("the label failed")
    return failed.value


async def test_a_dead_letter_reaches_the_roles_people_on_their_cards_channels_without_values_HATP_JRN_16(
    tmp_path: Path, clock: FakeClock
) -> None:
    with webhook_receiver("chat-secret") as hook, anyio.fail_after(30):
        async with smtp_receiver() as box:
            alert = DeliveredAlert(ROLE, directory(), CONTACTS, senders(box, hook, clock), "https://ops.acme.example")
            store = SqliteJournalStore(tmp_path / "j.db")
            failed = await fail_a_saga(Journal(store, KEY, tools=[CHARGE], clock=clock, alert=alert))
            rows = await store.dead_letters()
            store.close()
    ((to, mail),) = box.messages
    (chat,) = hook.received
    assert failed.dead_letters[0]["output"] == {"refund": SECRET_OUT}  # the journal's dead letter holds it all
    assert to == [CONTACTS[h("bob")]["email"]] and chat["channel"] == CONTACTS[h("carol")]["chat"]
    body = mail.get_payload(decode=True).decode()
    assert mail["Subject"] == "Journal: undo needs a person (saga-alert s1)"
    for said in ("saga saga-alert, step s1 (undo)", "Tool: charge", "saga-alert:s1:1", "charge settled"):
        assert said in body and said in chat["text"]
    shown = json.dumps({k: v for k, v in chat.items() if k != "channel"})  # `channel` addresses the message
    for private in (SECRET_ARG, SECRET_OUT, "40.00", *(a for book in CONTACTS.values() for a in book.values())):
        assert private not in body and private not in shown
    assert mail["X-HATP-Idempotency-Key"] == dead_letter_key(failed.dead_letters[0], h("bob"))
    frank = next(r for r in alert.sent if r.human == h("frank"))
    assert frank.channel is None and "no push channel" in frank.failures[0]
    assert [r.alerted for r in rows] == [True]


async def test_a_dead_letter_that_reached_nobody_stays_unalerted_and_is_sent_again_on_reopening_HATP_JRN_16(
    tmp_path: Path, clock: FakeClock
) -> None:
    with webhook_receiver("chat-secret") as hook, anyio.fail_after(30):
        async with smtp_receiver() as box:
            box.refuse, hook.statuses = 1, [500]  # the mail server and the chat service are down, once
            alert = DeliveredAlert(ROLE, directory(), CONTACTS, senders(box, hook, clock), "https://ops.acme.example")
            store = SqliteJournalStore(tmp_path / "j.db")
            await fail_a_saga(Journal(store, KEY, tools=[CHARGE], clock=clock, alert=alert))
            before = await store.dead_letters(unalerted_only=True)
            store.close()
            reached_then = [r.channel for r in alert.sent]
            again = SqliteJournalStore(tmp_path / "j.db")
            async with Journal(again, KEY, tools=[CHARGE], clock=clock, alert=alert):  # recovers: alerts again
                pass
            after = await again.dead_letters(unalerted_only=True)
            again.close()
    assert reached_then == [None, None, None] and len(before) == 1  # nobody: not counted as alerted
    assert after == [] and len(box.messages) == 1 and len(hook.received) == 1
    assert box.messages[0][1]["X-HATP-Idempotency-Key"] == dead_letter_key(before[0].entry, h("bob"))
    assert hook.keys == [dead_letter_key(before[0].entry, h("carol"))]

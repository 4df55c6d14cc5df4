"""Each channel's real wire format against a real receiver on loopback (HATP-GW-66): email over SMTP to aiosmtpd,
chat as a Slack-shaped webhook and sms as a provider webhook, both signed with HMAC-SHA256 over timestamp and
body. A failure's reason names no address, URL or secret."""

from __future__ import annotations

import anyio
import pytest

from hatp_mcp.core.gateway.notice import Notice
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.delivery.channels import (
    ChatChannel,
    DeliveryFailed,
    EmailChannel,
    SmsChannel,
    sign_webhook,
)
from hatp_mcp.runtime.gateway.delivery.settings import EmailSettings, WebhookSettings
from tests.runtime.gateway.delivery.receivers import smtp_receiver, webhook_receiver

pytestmark = pytest.mark.anyio

NOTICE = Notice(
    key="txn-1/finance|human://acme.com/carol|ask",
    ask_id="txn-1/finance",
    human="human://acme.com/carol",
    kind="ask",
    subject="Approval needed: travel.spend for human://acme.com/dana",
    text="Amount: USD 25,000.00 (up to USD 26,250.00).\nDecide by 2026-11-29T14:00:00Z.\n<b>&\nOpen: http://localhost:8400/asks/txn-1%2Ffinance",
    link="http://localhost:8400/asks/txn-1%2Ffinance",
)


async def test_HATP_GW_66_email_goes_over_smtp_with_the_notice_and_a_message_id_fixed_by_its_key() -> None:
    with anyio.fail_after(10):
        async with smtp_receiver() as box:
            channel = EmailChannel(EmailSettings("127.0.0.1", box.port, "approvals@acme.example"), timeout=5)
            await channel.send("carol@mail.acme.example", NOTICE)
            await channel.send("carol@mail.acme.example", NOTICE)  # a resend after a crash: same Message-ID
    (to, first), (_, second) = box.messages
    assert to == ["carol@mail.acme.example"]
    assert first["Subject"] == NOTICE.subject and first["From"] == "approvals@acme.example"
    text = first.get_payload(decode=True).decode()
    assert "up to USD 26,250.00" in text and NOTICE.link in text
    assert first["Message-ID"] == second["Message-ID"] and first["X-HATP-Idempotency-Key"] == NOTICE.key


async def test_HATP_GW_66_an_smtp_refusal_is_a_failed_attempt_naming_the_code_not_the_address() -> None:
    with anyio.fail_after(10):
        async with smtp_receiver() as box:
            box.refuse = 1
            channel = EmailChannel(EmailSettings("127.0.0.1", box.port, "approvals@acme.example"), timeout=5)
            with pytest.raises(DeliveryFailed) as failed:
                await channel.send("carol@mail.acme.example", NOTICE)
    assert str(failed.value) == "SMTP 451" and box.messages == []


async def test_HATP_GW_66_chat_posts_a_slack_incoming_webhook_body_signed_over_timestamp_and_body(
    clock: FakeClock,
) -> None:
    with webhook_receiver("chat-secret") as hook, anyio.fail_after(10):
        await ChatChannel(WebhookSettings(hook.url, "chat-secret"), clock, timeout=5).send("U0CAROL77", NOTICE)
    (body,) = hook.received
    assert body["channel"] == "U0CAROL77"
    assert body["text"].startswith(NOTICE.subject) and "&lt;b&gt;&amp;" in body["text"]  # mrkdwn escaping
    assert [b["type"] for b in body["blocks"]] == ["header", "section", "actions"]
    assert body["blocks"][2]["elements"][0]["url"] == NOTICE.link
    assert hook.keys == [NOTICE.key] and hook.bad_signatures == 0


async def test_HATP_GW_66_a_webhook_signed_with_another_secret_is_refused_by_the_receiver_and_fails(
    clock: FakeClock,
) -> None:
    with webhook_receiver("the-real-secret") as hook, anyio.fail_after(10):
        with pytest.raises(DeliveryFailed) as failed:
            await SmsChannel(WebhookSettings(hook.url, "a-wrong-secret", "+15550100"), clock, timeout=5).send(
                "+1-555-0100-alice", NOTICE
            )
    assert str(failed.value) == "HTTP 401" and hook.bad_signatures == 1 and hook.received == []
    assert hook.url not in str(failed.value)


async def test_HATP_GW_66_sms_posts_to_from_body_with_the_link_to_the_providers_url(clock: FakeClock) -> None:
    with webhook_receiver("sms-secret") as hook, anyio.fail_after(10):
        await SmsChannel(WebhookSettings(hook.url, "sms-secret", "+15550100"), clock, timeout=5).send(
            "+1-555-0100-alice", NOTICE
        )
    (body,) = hook.received
    assert body == {"to": "+1-555-0100-alice", "from": "+15550100", "body": f"{NOTICE.subject}. {NOTICE.link}"}


def test_the_signature_covers_the_timestamp_so_a_replayed_body_with_a_new_timestamp_does_not_verify() -> None:
    body = b'{"text":"x"}'
    assert sign_webhook("s", 1700000000, body) != sign_webhook("s", 1700000001, body)

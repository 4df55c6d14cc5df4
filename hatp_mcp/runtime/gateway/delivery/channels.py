"""One sender per contact kind, each speaking its real wire format (HATP-GW-66). A sender raises DeliveryFailed
with a reason that never holds an address, a URL or a secret (it lands in the delivery record).

- email: SMTP (the standard library's client, on a worker thread, bounded by the send timeout), optional STARTTLS
  and login; `Message-ID` is derived from the notice's idempotency key, so a receiving system can drop a resend.
- chat: an HTTP POST of a Slack incoming-webhook body (`text`, `blocks`, and `channel` = the person's chat id),
  text escaped as Slack's mrkdwn requires (&, <, >);
- sms: an HTTP POST of `{"to", "from", "body"}` to the provider's URL.
Both webhooks carry `X-HATP-Timestamp` (Unix seconds) and `X-HATP-Signature: v1=<hex HMAC-SHA256 of
"v1:{timestamp}:{body}">` under the channel's secret, and `Idempotency-Key` = the notice's key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from email.message import EmailMessage
from typing import Any, Protocol

import anyio

from hatp_mcp.core.gateway.notice import Notice
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.gateway.delivery.settings import EmailSettings, GatewaySettings, WebhookSettings

__all__ = [
    "ChatChannel",
    "DeliveryFailed",
    "EmailChannel",
    "Sender",
    "SmsChannel",
    "senders_from",
    "sign_webhook",
    "verify_webhook",
]


class DeliveryFailed(Exception):
    """One attempt on one channel failed; the reason names no address, URL or secret."""


class Sender(Protocol):
    kind: str

    async def send(self, address: str, notice: Notice) -> None:
        """Deliver `notice` to `address` (the person's contact for this kind). Raises DeliveryFailed."""
        ...


def sign_webhook(secret: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"v1:{timestamp}:".encode() + body, hashlib.sha256)
    return f"v1={mac.hexdigest()}"


def verify_webhook(secret: str, timestamp: str, body: bytes, signature: str) -> bool:
    """What a receiver checks (tests use it; so can an operator's relay)."""
    try:
        ts = int(timestamp)
    except ValueError:
        return False
    return hmac.compare_digest(sign_webhook(secret, ts, body), signature)


class EmailChannel:
    kind = "email"

    def __init__(self, settings: EmailSettings, timeout: float) -> None:
        self._s = settings
        self._timeout = timeout

    def _message(self, address: str, notice: Notice) -> EmailMessage:
        msg = EmailMessage()
        msg["From"] = self._s.sender
        msg["To"] = address
        msg["Subject"] = notice.subject
        domain = self._s.sender.rsplit("@", 1)[-1] or "hatp.invalid"
        digest = hashlib.sha256(notice.key.encode()).hexdigest()[:32]
        msg["Message-ID"] = f"<hatp-{digest}@{domain}>"  # the same for every resend of this notice
        msg["X-HATP-Idempotency-Key"] = notice.key
        msg.set_content(notice.text + "\n")
        return msg

    def _send(self, address: str, notice: Notice) -> None:
        msg = self._message(address, notice)
        try:
            with smtplib.SMTP(self._s.host, self._s.port, timeout=self._timeout) as smtp:
                if self._s.starttls:
                    smtp.starttls()
                if self._s.username is not None and self._s.password is not None:
                    smtp.login(self._s.username, self._s.password)
                smtp.send_message(msg)
        except smtplib.SMTPResponseException as exc:
            raise DeliveryFailed(f"SMTP {exc.smtp_code}") from None
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryFailed(f"SMTP failed: {type(exc).__name__}") from None

    async def send(self, address: str, notice: Notice) -> None:
        await anyio.to_thread.run_sync(self._send, address, notice, abandon_on_cancel=True)


def _post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> None:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status = resp.status
    except urllib.error.HTTPError as exc:
        raise DeliveryFailed(f"HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DeliveryFailed(f"HTTP failed: {type(exc).__name__}") from None
    if not 200 <= status < 300:
        raise DeliveryFailed(f"HTTP {status}")


class _Webhook(ABC):
    """A signed webhook channel; each kind says what its JSON body is."""

    kind = ""

    def __init__(self, settings: WebhookSettings, clock: Clock, timeout: float) -> None:
        self._s = settings
        self._clock = clock
        self._timeout = timeout

    @abstractmethod
    def body(self, address: str, notice: Notice) -> dict[str, Any]: ...

    async def send(self, address: str, notice: Notice) -> None:
        body = json.dumps(self.body(address, notice), separators=(",", ":")).encode()
        ts = int(self._clock.now().timestamp())
        headers = {
            "Content-Type": "application/json",
            "X-HATP-Timestamp": str(ts),
            "X-HATP-Signature": sign_webhook(self._s.secret, ts, body),
            "Idempotency-Key": notice.key,
        }
        await anyio.to_thread.run_sync(_post, self._s.url, body, headers, self._timeout, abandon_on_cancel=True)


def _mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class ChatChannel(_Webhook):
    kind = "chat"

    def body(self, address: str, notice: Notice) -> dict[str, Any]:
        return {
            "channel": address,
            "text": _mrkdwn(f"{notice.subject}\n{notice.text}"),
            "blocks": [
                {"type": "header", "text": {"type": "plain_text", "text": notice.subject[:150]}},
                {"type": "section", "text": {"type": "mrkdwn", "text": _mrkdwn(notice.text)[:3000]}},
                {
                    "type": "actions",
                    "elements": [
                        {"type": "button", "text": {"type": "plain_text", "text": "Open the ask"}, "url": notice.link}
                    ],
                },
            ],
        }


class SmsChannel(_Webhook):
    kind = "sms"

    def body(self, address: str, notice: Notice) -> dict[str, Any]:
        text = f"{notice.subject}. {notice.link}"
        return {"to": address, "from": self._s.sender, "body": text[:480]}


def senders_from(settings: GatewaySettings, clock: Clock) -> dict[str, Sender]:
    """A sender for each channel the settings configure."""
    timeout = settings.delivery.send_timeout_seconds
    out: dict[str, Sender] = {}
    if settings.email is not None:
        out["email"] = EmailChannel(settings.email, timeout)
    if settings.chat is not None:
        out["chat"] = ChatChannel(settings.chat, clock, timeout)
    if settings.sms is not None:
        out["sms"] = SmsChannel(settings.sms, clock, timeout)
    return out

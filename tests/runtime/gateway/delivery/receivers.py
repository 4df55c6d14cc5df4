"""Real receivers on loopback for the delivery tests: an SMTP server (aiosmtpd, on the test's own event loop) and
an HTTP webhook receiver (the standard library's server on a thread) that checks the HMAC signature the way a
provider's relay would. Both bind port 0 and stop when their context ends. Test code only."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope, Session

from hatp_mcp.runtime.gateway.delivery.channels import verify_webhook

__all__ = ["Hook", "Mailbox", "smtp_receiver", "webhook_receiver"]


@dataclass
class Mailbox:
    port: int
    messages: list[tuple[list[str], Message]] = field(default_factory=list)
    refuse: int = 0  # answer this many DATA commands with 451 first
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_for(self, count: int) -> list[tuple[list[str], Message]]:
        """Until `count` messages arrived (the caller bounds the wait)."""
        while len(self.messages) < count:
            self._arrived.clear()
            await self._arrived.wait()
        return self.messages


class _Handler:
    def __init__(self, box: Mailbox) -> None:
        self.box = box

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        if self.box.refuse > 0:
            self.box.refuse -= 1
            return "451 try again later"
        content = envelope.content if isinstance(envelope.content, bytes) else str(envelope.content).encode()
        self.box.messages.append((list(envelope.rcpt_tos), message_from_bytes(content)))
        self.box._arrived.set()
        return "250 OK"


@asynccontextmanager
async def smtp_receiver() -> AsyncIterator[Mailbox]:
    box = Mailbox(0)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(_Handler(box)), "127.0.0.1", 0)
    box.port = server.sockets[0].getsockname()[1]
    try:
        yield box
    finally:
        server.close()
        await server.wait_closed()


@dataclass
class Hook:
    url: str
    secret: str
    statuses: list[int] = field(default_factory=list)  # answer these statuses first, then 200
    received: list[dict[str, Any]] = field(default_factory=list)  # bodies whose signature checked
    bad_signatures: int = 0
    keys: list[str] = field(default_factory=list)  # Idempotency-Key of each accepted request


@contextmanager
def webhook_receiver(secret: str) -> Iterator[Hook]:
    hook = Hook("", secret)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                ok = verify_webhook(
                    secret, self.headers.get("X-HATP-Timestamp", ""), body, self.headers.get("X-HATP-Signature", "")
                )
                if not ok:
                    hook.bad_signatures += 1
                    status = 401
                elif hook.statuses:
                    status = hook.statuses.pop(0)
                else:
                    status = 200
                    hook.received.append(json.loads(body))
                    hook.keys.append(self.headers.get("Idempotency-Key", ""))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hook.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

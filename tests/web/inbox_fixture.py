"""A gateway with the web inbox on loopback for the web tests: acme.com's cards, bob's re-signed by the test Directory
key with a passkey whose private key the test holds (to give to Chromium's virtual authenticator or the software
authenticator), a fake clock, and uvicorn serving the Starlette app on a port the OS picked. Test code only."""

from __future__ import annotations

import base64
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import uvicorn
from cryptography.hazmat.primitives import serialization

from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.gateway.passkey import RelyingParty, unb64u
from hatp_mcp.runtime.card_watch import CardWatch
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover, RecordingNotifier
from hatp_mcp.runtime.org import load_directory
from hatp_mcp.store.gateway_store import SqliteGatewayStore
from hatp_mcp.store.inbox_state import InboxState
from hatp_mcp.web.inbox import Inbox
from tests.acme_org import NAMES, card_doc, gateway_key, h, resigned, well_known
from tests.passkey_authenticator import SoftAuthenticator

__all__ = ["Served", "serve_inbox"]


@dataclass
class Served:
    gateway: GatewayApprover
    inbox: Inbox
    origin: str
    bob: SoftAuthenticator

    def private_key_b64(self) -> str:
        der = self.bob.key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return base64.b64encode(der).decode()

    def cdp_credential(self) -> dict[str, object]:
        """Bob's passkey (the one on his signed card) as the CDP virtual authenticator takes it."""
        return {
            "credentialId": base64.b64encode(unb64u(self.bob.credential_id)).decode(),
            "isResidentCredential": True,
            "rpId": "localhost",
            "privateKey": self.private_key_b64(),
            "userHandle": base64.b64encode(b"bob").decode(),
            "signCount": 0,
        }


@asynccontextmanager
async def serve_inbox(data: Path, clock: FakeClock, org: Path | None = None) -> AsyncIterator[Served]:
    """The inbox over acme.com with bob's soft passkey on his card, or over the organisation dir `org` as is."""
    bob = SoftAuthenticator(h("bob"))
    if org is None:
        docs = [card_doc(n) for n in NAMES if n != "bob"]
        docs.append(resigned("bob", keys=[*card_doc("bob")["keys"], bob.card_key()]))
        directory, ignored = Directory.load(well_known(), docs)
        assert not ignored
    else:
        directory, _ignored = load_directory(org)
    store = SqliteGatewayStore(data)
    gw = GatewayApprover(directory=directory, key=gateway_key(), store=store, clock=clock, notifier=RecordingNotifier())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    origin = f"http://localhost:{port}"
    state = InboxState(data)
    # over an organisation dir, the gateway sees cards the operator re-signs while it runs (HATP-GW-82)
    cards = CardWatch(org, gw.use_directory) if org is not None else None
    inbox = Inbox(gw, state, RelyingParty("localhost", (origin,)), clock, cards=cards)
    server = uvicorn.Server(uvicorn.Config(inbox.app, log_level="warning", lifespan="off"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            with anyio.fail_after(10):
                while not server.started:
                    await anyio.lowlevel.checkpoint()
            yield Served(gw, inbox, origin, bob)
            server.should_exit = True
    finally:
        sock.close()
        state.close()
        store.close()

"""The Human Gateway as an MCP server process.

`python -m servers.gateway --transport stdio|http [--port N] [--data DIR] [--org DIR] [--key FILE] [--now TS]`

- The organisation (default spec/fixtures/org, the TEST-ONLY acme.com): its well-known document, the Directory's
  signed cards (unsigned or altered ones are ignored, each logged with its rule), its signed agent cards
  (`agents/`, the only proof of whom an agent asking for a tool call acts for) and `contacts.json`, copied into
  the store's private contacts table (never into a message).
- The signing key (role gateway), first found of: `--key FILE`; `DIR/key.jwk.json` (HATP-MCP-8); the org's
  `test-only-keys/gateway.private.jwk.json` when the well-known publishes its kid with role gateway (the demo
  and tests: coordinators trust the well-known's keys, so the gateway must sign with a published one); else a new
  key created in DIR, whose public half (`DIR/public.jwk.json`) the organisation must publish. A key the
  well-known does not publish as a gateway key is logged as a warning at start: its votes will not verify.
- State: GatewayStore in `DIR/gateway.db`, shared with `hatp inbox --data DIR` (another process; SQLite WAL), or
  in PostgreSQL with `--store postgresql://...` (`hatp inbox --store` the same URL). A decision made there is
  picked up on the next poll or tick. Several gateway processes may share one store (spec/gateway.md
  HATP-GW-76..79): each applies a timer step in one write that records it under its owner id (`--owner`,
  default host/pid) and claims each delivery attempt under a lease, so nothing is done twice.
- Delivery (hatp_mcp/runtime/gateway/delivery): the org's `gateway.json` names the channels (email over SMTP, chat and
  sms as signed webhooks), the inbox link and the retry policy, secrets from environment variables or 0600 files
  (HATP-GW-65); the Deliverer's queue is `deliveries.db` beside the SQLite store (`DIR/deliveries.db` by default), or in
  the PostgreSQL store. Without `gateway.json` nothing is pushed (every notice is recorded as `inbox`: the ask waits in
  the inbox).
- `--inbox-port N` (default off) also serves the web inbox (hatp_mcp/web) on `--inbox-host` (default localhost):
  passkey sign-in and decisions; its WebAuthn relying party is the org's `gateway.json` `passkey` member, else
  rpId `localhost` and origin `http://localhost:N` (the port actually bound). Put it behind your own TLS proxy
  for anything but localhost, with `passkey.origins` naming the proxy's https origin. With `--records DIR` and
  `--record-keys JWKS` it also draws finished transactions' timelines for the people asked about them
  (`DIR/<txnId>.record.json`, checked with that keyring on every view, HATP-GW-81).
- `--mcp-port N` (default off) also serves MCP over streamable HTTP on 127.0.0.1:N beside stdio: the one gateway
  process of an organisation (`hatp mcp-config --org`) is the one Claude Desktop starts over stdio, and the
  coordinator reaches that same process over this port instead of starting a second gateway on the same store
  (HATP-MCP-35). The port is bound before anything starts, so a second gateway for the same organisation cannot
  start beside the first ("port in use"): one process owns the timers, the delivery queue and the long polls.
- Timers (SLA escalation, deadlines) run on the system clock; `--now` pins a fake clock that never moves (tests).
  The process says it is ready (`HATP_READY`) once its first timer round and first delivery step are done.
- Serves hatp/txn/{prepare,voted,abort} (hatp_mcp/mcp/gateway_server.py) and the people's and agents' tools
  (hatp_mcp/mcp/gateway_tools.py); `--no-signing-tools` (what `hatp mcp-config` writes for a chat app) leaves out
  those whose calls need a signature the client makes: decide, request_approval, ask_* (HATP-MCP-57). Never
  writes to stdout (the stdio wire).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
import uvicorn
from mcp.server import MCPServer

from hatp_mcp.core.gateway.passkey import RelyingParty
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.gateway_questions import serve_gateway_questions
from hatp_mcp.mcp.gateway_server import serve_gateway
from hatp_mcp.mcp.gateway_tools import add_gateway_tools
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.http_callers import CallerTokens, add_callers_argument, caller_middleware
from hatp_mcp.mcp.serve import (
    add_server_arguments,
    add_trust_argument,
    bind_loopback,
    log,
    quiet,
    serve,
    serve_http_beside,
)
from hatp_mcp.runtime.card_watch import CardWatch
from hatp_mcp.runtime.clock import Clock, FakeClock, SystemClock
from hatp_mcp.runtime.coordinator_trust import open_trust
from hatp_mcp.runtime.gateway.delivery.channels import senders_from
from hatp_mcp.runtime.gateway.delivery.settings import GatewaySettings, load_settings
from hatp_mcp.runtime.gateway.delivery.worker import Deliverer
from hatp_mcp.runtime.gateway.driver import GatewayApprover, load_org
from hatp_mcp.runtime.org import load_agents, load_relying_party
from hatp_mcp.store.gateway_store import DB_NAME
from hatp_mcp.store.inbox_state import InboxState
from hatp_mcp.store.url import StoreUrl, open_delivery_queue, open_gateway_store, open_txn_bindings
from hatp_mcp.web.inbox import Inbox
from hatp_mcp.web.record_shelf import RecordShelf
from servers._keys import load_or_create_key

__all__ = ["DEFAULT_ORG", "build", "choose_key", "main"]

DEFAULT_ORG = Path(__file__).resolve().parents[1] / "spec" / "fixtures" / "org"


def choose_key(data: Path, org: Path, published: Keyring, key_file: str | None) -> SigningKey:
    """The gateway's signing key (see the module docstring for the order). Raises OSError or ValueError."""
    if key_file is not None:
        key = SigningKey.from_jwk(json.loads(Path(key_file).read_text()))
    elif not (data / "key.jwk.json").exists() and (org / "test-only-keys" / "gateway.private.jwk.json").exists():
        test_key = SigningKey.from_jwk(json.loads((org / "test-only-keys" / "gateway.private.jwk.json").read_text()))
        entry = published.get(test_key.kid)
        key = test_key if entry is not None and "gateway" in entry.roles else load_or_create_key(data, ["gateway"])
    else:
        key = load_or_create_key(data, ["gateway"])
    entry = published.get(key.kid)
    if entry is None or "gateway" not in entry.roles or entry.raw() != key.public_raw():
        log(f"gateway: WARNING key {key.kid} is not published as a gateway key in the well-known; votes won't verify")
    return key


def build(
    data: Path,
    org: Path,
    clock: Clock,
    key_file: str | None = None,
    trusted_coordinators: str | None = None,
    store_url: StoreUrl | None = None,
    owner: str | None = None,
    signing_tools: bool = True,
) -> tuple[MCPServer, GatewayApprover, Deliverer]:
    """Load the organisation, key, settings and stores (`store_url`, default DATA/gateway.db; the delivery queue
    beside it, hatp_mcp.store.url.open_delivery_queue) and build the server; `owner` names this process on the
    timers it takes (default host/pid). `trusted_coordinators`: the `--trusted-coordinators [ID=]FILE`
    flag (default DATA/trusted-coordinators.json; none: every prepare, abort and tighten is refused,
    HATP-TRUST-6). `signing_tools` False leaves out the tools whose calls need a signature the client makes
    (HATP-MCP-57). Raises OSError, ValueError or HatpError (HATP-GW-65: unusable delivery settings)."""
    directory, ignored, contacts = load_org(org)
    configured = load_settings(org)
    settings = configured or GatewaySettings()
    if any("test-only" in e.kid for e in directory.keyring.entries()):
        log(f"gateway: organisation {directory.well_known.organization} is TEST-ONLY (its keys are published)")
    for card in ignored:
        log(f"gateway: ignored card {card.card_id}: {card.rule} {card.reason}")
    data.mkdir(parents=True, exist_ok=True)
    key = choose_key(data, org, directory.keyring, key_file)
    if "gateway" not in key.roles:
        raise ValueError(f"key {key.kid} has roles {sorted(key.roles)}; the gateway signs with role 'gateway'")
    url = store_url or StoreUrl.sqlite(data / DB_NAME)
    store = open_gateway_store(url)
    for human, book in contacts.items():
        for channel, address in book.items():
            store.set_contact(human, channel, address)
    agents, ignored_agents = load_agents(org)
    for card in ignored_agents:
        log(f"gateway: ignored agent card {card.card_id}: {card.rule} {card.reason}")
    gateway = GatewayApprover(directory=directory, key=key, store=store, clock=clock, agents=agents, owner=owner)
    gateway.inbox_url = settings.inbox_url if configured is not None else None  # else: the inbox served here
    deliverer = Deliverer(
        gateway=gateway,
        outbox=open_delivery_queue(url),
        senders=senders_from(settings, clock),
        settings=settings.delivery,
        inbox_url=settings.inbox_url,
        clock=clock,
    )
    gateway.notifier = deliverer  # the people are told over their channels (or the ask waits in the inbox)
    log(f"gateway: timers and deliveries owned as {gateway.owner!r} on {url}")
    bindings = open_txn_bindings(store_url) if store_url is not None and store_url.backend != "sqlite" else None
    trust = open_trust(data, trusted_coordinators, clock, bindings)  # HATP-TRUST-10, bindings with the asks
    if trust.keyring is None:
        log("gateway: WARNING no trusted coordinator; hatp/txn/prepare, abort and tighten are refused (HATP-TRUST-6)")
    server = HatpServer("hatp-gateway", version="0.1.0", log_level="WARNING")
    serve_gateway(server, gateway, trust=trust)
    add_gateway_tools(server, gateway, signing=signing_tools)
    serve_gateway_questions(server, gateway, signing=signing_tools)
    return server, gateway, deliverer


CARD_POLL_SECONDS = 2.0


class _InboxServer(uvicorn.Server):
    """uvicorn without its own signal handlers: the MCP server's (hatp_mcp.mcp.serve) stop the whole process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def open_inbox(
    gateway: GatewayApprover,
    data: Path,
    org: Path,
    clock: Clock,
    host: str,
    port: int,
    records: RecordShelf | None = None,
    cards: CardWatch | None = None,
) -> tuple[Inbox, socket.socket, str]:
    """The web inbox on a socket bound now (so the origin names the real port). Raises OSError or HatpError."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1" if host == "localhost" else host, port))
    bound = sock.getsockname()[1]
    origin = f"http://localhost:{bound}" if host == "localhost" else f"http://{host}:{bound}"
    rp = load_relying_party(org) or RelyingParty("localhost", (origin,))
    return Inbox(gateway, InboxState(data), rp, clock, records=records, cards=cards), sock, origin


async def _watch_cards(cards: CardWatch) -> None:
    """HATP-GW-82: a card the operator re-signs is used within seconds even if nobody opens the inbox (real time:
    a file poll, not a protocol deadline)."""
    while True:
        await anyio.sleep(CARD_POLL_SECONDS)
        if cards.refresh():
            log("gateway: the organisation's cards changed; using them now")


async def _run(
    server: MCPServer,
    gateway: GatewayApprover,
    deliverer: Deliverer,
    inbox: tuple[Inbox, socket.socket, str] | None,
    cards: CardWatch,
    transport: str,
    port: int,
    parent_watch: bool,
    beside: socket.socket | None = None,
) -> None:
    async with anyio.create_task_group() as tg:
        await tg.start(gateway.run)
        await tg.start(deliverer.run)
        tg.start_soon(_watch_cards, cards)
        if inbox is not None:
            web = _InboxServer(uvicorn.Config(inbox[0].app, log_level="warning", lifespan="off"))
            tg.start_soon(web.serve, [inbox[1]])
            log(f"gateway: inbox at {inbox[2]}/")
        async with contextlib.AsyncExitStack() as stack:
            if beside is not None:  # the coordinator's link to this same process (HATP-MCP-35)
                await stack.enter_async_context(serve_http_beside(server, beside))
                log(f"gateway: MCP for the coordinator at http://127.0.0.1:{beside.getsockname()[1]}/mcp")
            await serve(server, transport, port, parent_watch=parent_watch)
        tg.cancel_scope.cancel()


CALLERS_RULE = "HATP-GW-89"


def gateway_guards(method: str) -> bool:
    """HATP-GW-89: what a caller over HTTP needs its token for: the tools (people's and agents') and the resources.
    The coordinator's `hatp/txn/*` requests prove themselves by its signature instead (HATP-TRUST-11)."""
    return method in ("tools/call", "resources/read")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="servers.gateway", description="the Human Gateway MCP server (HATP)")
    add_server_arguments(parser)
    parser.add_argument("--org", default=str(DEFAULT_ORG), help="organisation dir (.well-known, cards, contacts)")
    parser.add_argument("--key", default=None, help="the gateway's private JWK (role gateway)")
    parser.add_argument("--now", default=None, help="pin a fake clock at this RFC 3339 UTC time (tests)")
    parser.add_argument("--inbox-port", type=int, default=None, help="serve the web inbox on this port (0: any)")
    parser.add_argument("--inbox-host", default="localhost", help="the web inbox's host (default localhost)")
    parser.add_argument(
        "--mcp-port",
        type=int,
        default=None,
        help="also serve MCP over streamable HTTP on 127.0.0.1:N beside stdio (the coordinator's link to this one "
        "gateway process)",
    )
    parser.add_argument(
        "--records", help="the inbox draws timelines of the finished records in DIR/<txnId>.record.json"
    )
    parser.add_argument("--record-keys", help="keyring (JWKS) the records are checked with (with --records)")
    add_trust_argument(parser)
    parser.add_argument(
        "--store", help="asks and proofs: sqlite:PATH (default: sqlite:DATA/gateway.db) or postgresql://USER@HOST/DB"
    )
    parser.add_argument("--owner", default=None, help="this process's name on the timers it takes (default host/pid)")
    parser.add_argument(
        "--no-signing-tools",
        action="store_true",
        help="for a client that cannot sign (a chat app): leave out decide, request_approval and ask_* (HATP-MCP-57)",
    )
    add_callers_argument(parser)
    args = parser.parse_args(argv)
    quiet()
    data = Path(args.data).resolve() if args.data else Path.home() / ".hatp" / "gateway"
    try:
        clock: Clock = FakeClock(parse_ts(args.now)) if args.now else SystemClock()
        store = StoreUrl.parse(args.store) if args.store else None
        server, gateway, deliverer = build(
            data,
            Path(args.org).resolve(),
            clock,
            args.key,
            args.trusted_coordinators,
            store,
            args.owner,
            signing_tools=not args.no_signing_tools,
        )
        if args.callers is not None:  # HATP-GW-89: over HTTP, every tool call and read carries a caller's token
            callers = CallerTokens.parse(json.loads(Path(args.callers).read_text()), args.callers)
            server.middleware.append(
                caller_middleware(callers, rule=CALLERS_RULE, server="gateway", guards=gateway_guards)
            )
        inbox = None
        org = Path(args.org).resolve()
        cards = CardWatch(
            org,
            gateway.use_directory,
            on_ignored=lambda c: log(f"gateway: ignored card {c.card_id}: {c.rule} {c.reason}"),
            on_error=lambda why: log(f"gateway: {why}"),
        )
        if args.inbox_port is not None:
            shelf = None
            if args.records or args.record_keys:
                if not (args.records and args.record_keys):
                    raise ValueError("--records and --record-keys go together (a record is drawn only once checked)")
                shelf = RecordShelf(Path(args.records).resolve(), Path(args.record_keys).resolve())
            inbox = open_inbox(gateway, data, org, clock, args.inbox_host, args.inbox_port, shelf, cards)
            gateway.inbox_url = gateway.inbox_url or inbox[2]  # the link an open ask's answer gives (HATP-MCP-54)
        try:
            beside = bind_loopback(args.mcp_port) if args.mcp_port is not None else None
        except OSError as exc:
            log(
                f"gateway: cannot start: --mcp-port {args.mcp_port}: {exc.strerror or exc}; is another gateway of"
                " this organisation running? One gateway process per store (HATP-MCP-35)"
            )
            return 2
    except HatpError as exc:  # an unusable well-known document or delivery settings
        log(f"gateway: cannot start: {exc.one_line()}")
        return 2
    except (OSError, ValueError) as exc:
        log(f"gateway: cannot start: {exc}")
        return 2
    try:
        run = functools.partial(
            _run, server, gateway, deliverer, inbox, cards, args.transport, args.port, args.parent_watch, beside
        )
        anyio.run(run)
    finally:
        gateway.store.close()
        deliverer.outbox.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The coordinator as its own MCP server process.

`python -m servers.coordinator --transport stdio|http [--port N] [--data DIR] --participants CONFIG`
(or `--participant URI=TARGET`, repeatable) and `--gateway TARGET --gateway-keys JWKS` (or, for tests and demos
without a gateway process, `--scripted-approver approve|reject|never`). A TARGET is `http://127.0.0.1:N/mcp` or
`stdio:MODULE[:DATA_DIR]` (this process then starts the server as its stdio child). CONFIG is a JSON file
`{"participants": {uri: target}, "gateway": target, "gatewayKeys": path, "gatewayId": id}`; a participant's target
may be an object with `keys` (a JWKS or JWK file, or the keys inline): the keys its evidence must be signed with.
`--participant-keys URI=FILE` pins them from the command line. A participant whose keys are not pinned is refused
at start (HATP-MCP-28) unless `--trust-advertised-keys` allows trust on first use.

Every state-changing request it sends carries its signed auth (HATP-TRUST-11): each participant and the gateway
must list its public key (`DATA/public.jwk.json`) bound to `--id` in their trust list (HATP-TRUST-10).

Under --data: the signing key (key.jwk.json, role coordinator), the durable decision log (coordinator.db, unless
`--store postgresql://USER@HOST:PORT/DB` keeps it in PostgreSQL; `--store sqlite:PATH` puts the file elsewhere) and
the stderr of stdio children (and, with --trust-advertised-keys, under trusted-keys/ the keys each participant first
advertised). On start it reaches every participant (an advertised key outside its pinned ones is refused,
HATP-MCP-27), then
finishes every transaction its log holds open (HATP-MCP-24), then serves agents (hatp_mcp.mcp.coordinator_server).

With `--org DIR` every plan's requester must be proven at begin (HATP-TXN-21) against the agent cards in
DIR/agents: by the agent's own signed request (`begin_transaction`'s `request`), or, for clients that cannot sign
(Claude Desktop), by `--agent-key FILE`: this coordinator then holds the agent's key and signs each plan as the
agent its card names, for the person the card names.

Over HTTP it needs `--callers FILE` (hatp_mcp.mcp.http_callers, HATP-MCP-53): each caller's id (the agent address
it acts as) and the SHA-256 of its bearer token, and `"sees": "all"` for a caller the operator lets see every
transaction. Every request but the handshake and the listings carries `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import anyio

from hatp_mcp.core.gateway.agents import card_of_key
from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.core.txn.machine import Config
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import Signer
from hatp_mcp.mcp.coordinator_server import serve_coordinator
from hatp_mcp.mcp.extension import HatpSettings
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.http_callers import CallerTokens, add_callers_argument, read_callers
from hatp_mcp.mcp.pins import KeySource, participant_keyring, unpinned
from hatp_mcp.mcp.serve import add_server_arguments, log, quiet, serve
from hatp_mcp.mcp.server_links import LinkedApprover, LinkedParticipant, Target, bounds_over_links, open_links
from hatp_mcp.runtime.card_watch import CardWatch
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator.fresh_cards_approver import FreshCardsApprover
from hatp_mcp.runtime.coordinator.scripted_approver import SCRIPTED_GATEWAY, HumanScript, ScriptedApprover
from hatp_mcp.runtime.coordinator.service import TxnService
from hatp_mcp.runtime.coordinator_trust import RequestSigner
from hatp_mcp.runtime.interfaces import Approver, WatchingApprover
from hatp_mcp.runtime.org import load_agents, load_human_keys
from hatp_mcp.store.txn_log import TxnLeases, TxnLog
from hatp_mcp.store.url import StoreUrl, open_txn_log
from servers._keys import load_or_create_key

__all__ = ["GATEWAY", "Setup", "main", "read_setup"]

GATEWAY = "gateway"  # the link name of the Human Gateway


class Setup:
    """Where the participants and the gateway are, read from CONFIG and the flags."""

    def __init__(self) -> None:
        self.participants: dict[str, Target] = {}
        self.participant_keys: dict[str, KeySource] = {}  # uri -> the keys pinned for it
        self.gateway: Target | None = None
        self.gateway_keys: Path | None = None
        self.gateway_id: str | None = None
        self.org: Path | None = None  # the organisation's cards: each human decision's proof is checked


def read_setup(args: argparse.Namespace) -> Setup:
    """Raises ValueError (a wrong target or config), OSError (an unreadable config) or HatpError HATP-MCP-28 (a
    participant without pinned keys, trust on first use not allowed)."""
    setup = Setup()
    if args.participants:
        doc: Any = json.loads(Path(args.participants).read_text())
        if not isinstance(doc, dict) or not isinstance(doc.get("participants", {}), dict):
            raise ValueError(f"{args.participants}: expected an object with a 'participants' object")
        for uri, target in doc.get("participants", {}).items():
            setup.participants[uri] = Target.parse(target)
            keys = target.get("keys") if isinstance(target, dict) else None
            if isinstance(keys, str):
                setup.participant_keys[uri] = Path(keys)
            elif isinstance(keys, dict):
                setup.participant_keys[uri] = keys
            elif keys is not None:
                raise ValueError(f"participants[{uri!r}].keys: give a JWKS or JWK file path, or the keys inline")
        if doc.get("gateway") is not None:
            setup.gateway = Target.parse(doc["gateway"])
        if doc.get("gatewayKeys"):
            setup.gateway_keys = Path(str(doc["gatewayKeys"]))
        setup.gateway_id = doc.get("gatewayId")
        if doc.get("org"):
            setup.org = Path(str(doc["org"]))
    for item in args.participant or []:
        uri, sep, target = item.partition("=")
        if not sep:
            raise ValueError(f"--participant takes URI=TARGET, not {item!r}")
        setup.participants[uri] = Target.parse(target)
    for item in args.participant_keys or []:
        uri, sep, file = item.partition("=")
        if not sep or not file:
            raise ValueError(f"--participant-keys takes URI=FILE, not {item!r}")
        setup.participant_keys[uri] = Path(file)
    unknown = sorted(set(setup.participant_keys) - set(setup.participants))
    if unknown:
        raise ValueError(f"keys are pinned for {', '.join(unknown)}, which is not a participant")
    for uri in setup.participants:  # refused before any participant is reached
        if uri not in setup.participant_keys and not args.trust_advertised_keys:
            raise unpinned(uri)
    if args.gateway:
        setup.gateway = Target.parse(args.gateway)
    if args.gateway_keys:
        setup.gateway_keys = Path(args.gateway_keys)
    setup.gateway_id = args.gateway_id or setup.gateway_id
    if setup.gateway is not None and setup.gateway_keys is None:
        raise ValueError("--gateway needs --gateway-keys (the organisation's JWKS with the gateway's key)")
    if setup.gateway is not None and not setup.gateway_id:
        raise ValueError("--gateway needs --gateway-id (the id its votes name; its keys speak only as that id)")
    if args.org:
        setup.org = Path(args.org)
    if setup.gateway is not None and setup.org is None and not args.trust_gateway_decisions:
        raise ValueError(
            "--gateway needs --org DIR (the organisation's cards, to check each person's signed decision, "
            "HATP-TXN-19), or --trust-gateway-decisions to count the gateway's word alone"
        )
    return setup


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servers.coordinator", description="the HATP coordinator MCP server")
    add_server_arguments(p)
    add_callers_argument(p)
    p.add_argument("--participants", help="JSON file: {participants: {uri: target}, gateway, gatewayKeys}")
    p.add_argument("--participant", action="append", help="URI=TARGET (repeatable)")
    p.add_argument(
        "--participant-keys", action="append", help="URI=FILE: the JWKS or JWK its evidence is signed with (repeatable)"
    )
    p.add_argument(
        "--trust-advertised-keys",
        action="store_true",
        help="trust on first use: a participant without pinned keys is trusted with the keys it first advertises",
    )
    p.add_argument("--gateway", help="the Human Gateway: http://... or stdio:MODULE[:DATA]")
    p.add_argument("--gateway-keys", help="JWKS file holding the gateway's public key (role gateway)")
    p.add_argument("--gateway-id", help="the gateway id every vote must name (e.g. gateway://acme.com)")
    p.add_argument(
        "--org",
        help="organisation dir (.well-known/human-card.json, cards/*.json): check each person's signed decision",
    )
    p.add_argument(
        "--trust-gateway-decisions",
        action="store_true",
        help="with a gateway but no --org: count the gateway's word for who decided (recorded as not checked)",
    )
    p.add_argument(
        "--agent-key",
        help="the agent's private JWK (role agent, on a Directory-signed agent card in --org): this coordinator "
        "signs the plans of its clients that cannot sign as that agent (HATP-TXN-21)",
    )
    p.add_argument(
        "--owner", help="postgresql store: this process's owner id in the shared log's leases (default: host/pid)"
    )
    p.add_argument(
        "--lease-seconds",
        type=float,
        default=30.0,
        help="postgresql store: a transaction's lease; unrenewed that long, another coordinator takes it over",
    )
    p.add_argument("--scripted-approver", choices=["approve", "reject", "never"], help="tests: no gateway process")
    p.add_argument("--id", default="coordinator://localhost", help="this coordinator's id in records")
    p.add_argument("--call-timeout", type=float, default=30.0, help="seconds to wait for one participant answer")
    p.add_argument("--retry-seconds", type=int, default=30, help="retry an in-doubt commit or undo this often")
    p.add_argument(
        "--undo-attempts",
        type=int,
        default=10,
        help="send an undo that stays in doubt at most this often, then offer it for recovery (HATP-TXN-31, 33)",
    )
    p.add_argument("--poll-seconds", type=int, default=30, help="poll a pending approval this often")
    p.add_argument(
        "--store",
        help="the decision log: sqlite:PATH (default: sqlite:DATA/coordinator.db) or postgresql://USER@HOST:PORT/DB",
    )
    return p


async def _run(
    args: argparse.Namespace,
    data: Path,
    setup: Setup,
    store: StoreUrl,
    agent_key: SigningKey | None = None,
    callers: CallerTokens | None = None,
) -> int:
    async with contextlib.AsyncExitStack() as stack:
        try:
            txn_log = await stack.enter_async_context(
                open_txn_log(store, owner=args.owner, lease_seconds=args.lease_seconds)
            )
        except (HatpError, OSError, ValueError) as exc:  # HATP-STORE-1/3, unreachable, no psycopg
            log(f"coordinator: cannot start: {store}: {exc}")
            return 2
        return await _serve(args, data, setup, txn_log, agent_key, callers)


async def _serve(
    args: argparse.Namespace,
    data: Path,
    setup: Setup,
    txn_log: TxnLog,
    agent_key: SigningKey | None,
    callers: CallerTokens | None = None,
) -> int:
    key = load_or_create_key(data, ["coordinator"])
    clock = SystemClock()
    # every state-changing request carries its auth (HATP-TRUST-11); on a shared log, with the lease's epoch (-9)
    epoch_of = txn_log.epoch if isinstance(txn_log, TxnLeases) else None
    signer = RequestSigner(key, args.id, clock, epoch_of).sign
    keyring = Keyring()
    keyring.add_signer(key)
    targets = dict(setup.participants)
    if setup.gateway is not None:
        targets[GATEWAY] = setup.gateway
    async with open_links(targets, data) as links:
        participants: dict[str, LinkedParticipant] = {}
        try:
            for uri in setup.participants:
                own = await participant_keyring(
                    uri,
                    links[uri],
                    "participant",
                    pinned=setup.participant_keys.get(uri),
                    trust_dir=data if args.trust_advertised_keys else None,
                    on_unreachable=lambda why: log(f"coordinator: WARNING {why}"),
                )
                for entry in own.entries():  # bound to `uri` (HATP-SIG-6): counted for its own branches only
                    keyring.add(entry)
                participants[uri] = LinkedParticipant(uri, links[uri], own, timeout=args.call_timeout, signer=signer)
        except (HatpError, OSError, ValueError) as exc:
            log(f"coordinator: cannot start: {exc}")
            return 2
        approver = _approver(args, data, setup, links, keyring, clock, signer)
        cards: CardWatch | None = None
        try:
            humans = load_human_keys(setup.org) if setup.org is not None else None
            if humans is not None and setup.org is not None:  # HATP-GW-82: cards re-signed meanwhile count at once
                keys = humans

                def use(directory: Directory) -> None:
                    keys.use_cards(directory.cards())

                cards = CardWatch(
                    setup.org,
                    use,
                    on_ignored=lambda c: log(f"coordinator: ignored card {c.card_id}: {c.rule} {c.reason}"),
                    on_error=lambda why: log(f"coordinator: {why}"),
                )
                if approver is not None and hasattr(approver, "wait"):
                    approver = FreshCardsApprover(cast(WatchingApprover, approver), cards.refresh)
            # with the organisation, every plan's requester is proven at begin (HATP-TXN-21)
            agents = load_agents(setup.org)[0] if setup.org is not None else None
            if agent_key is not None and (agents is None or card_of_key(agents, agent_key) is None):
                raise ValueError("--agent-key must be the key of a Directory-signed agent card in --org")
        except (HatpError, OSError, ValueError) as exc:
            log(f"coordinator: cannot start: {setup.org}: {exc}")
            return 2
        service = TxnService(
            key=key,
            keyring=keyring,
            participants=participants,
            approver=approver,
            log=txn_log,
            bounds=bounds_over_links(participants),  # HATP-MODE-9: each participant's stated bounds, at begin
            clock=clock,
            config=Config(
                coordinator=args.id,
                poll_seconds=args.poll_seconds,
                retry_seconds=args.retry_seconds,
                undo_attempts=args.undo_attempts,
                humans=humans,
            ),
            agents=agents,
            agent_key=agent_key,
        )
        server = HatpServer("hatp-coordinator", version="0.1.0", log_level="WARNING")
        settings = HatpSettings(roles=["coordinator"], keys=[key.public_jwk()])
        serve_coordinator(server, service, settings, callers=callers)
        async with service.running(), anyio.create_task_group() as tg:
            if cards is not None:
                tg.start_soon(_watch_cards, cards)
            recovered = await service.recover_unfinished()
            if recovered:
                log(f"coordinator: finishing {len(recovered)} unfinished transaction(s): {', '.join(recovered)}")
            await serve(server, args.transport, args.port, parent_watch=args.parent_watch)
            tg.cancel_scope.cancel()
    return 0


async def _watch_cards(cards: CardWatch) -> None:
    """HATP-GW-82: the cards as the Directory re-signs them, also between approvals (a file poll in real time)."""
    while True:
        await anyio.sleep(2.0)
        cards.refresh()


def _approver(
    args: argparse.Namespace,
    data: Path,
    setup: Setup,
    links: Any,
    keyring: Keyring,
    clock: SystemClock,
    signer: Signer,
) -> Approver | None:
    if setup.gateway is not None and setup.gateway_keys is not None:
        org = Keyring.from_jwks(json.loads(setup.gateway_keys.read_text()))
        for entry in org.entries():
            if "gateway" in entry.roles:  # HATP-SIG-6: the organisation's gateway keys speak as --gateway-id only
                keyring.add(entry.with_party(str(setup.gateway_id)))
        return LinkedApprover(
            links[GATEWAY],
            org,
            timeout=args.call_timeout,
            gateway_id=setup.gateway_id,
            coordinator=args.id,
            signer=signer,
        )
    if args.scripted_approver:
        gw = load_or_create_key(data / "scripted-gateway", ["gateway"])
        keyring.add_signer(gw, SCRIPTED_GATEWAY)
        # the demo's and the tests' plans name one requirement, "finance"; any other is approved
        return ScriptedApprover(gw, clock, scripts={"finance": HumanScript(args.scripted_approver)})
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quiet()
    data = Path(args.data).resolve() if args.data else Path.home() / ".hatp" / "coordinator"
    try:
        Config(undo_attempts=args.undo_attempts)  # HATP-TXN-33: refused before anything is written or started
        setup = read_setup(args)
        store = StoreUrl.parse(args.store) if args.store else StoreUrl.sqlite(data / "coordinator.db")
        data.mkdir(parents=True, exist_ok=True)
        agent_key = SigningKey.from_jwk(json.loads(Path(args.agent_key).read_text())) if args.agent_key else None
        callers = read_callers(args, "coordinator")  # HATP-MCP-53: HTTP without callers is refused
    except (HatpError, OSError, ValueError) as exc:
        log(f"coordinator: cannot start: {exc}")
        return 2
    return anyio.run(functools.partial(_run, args, data, setup, store, agent_key, callers))


if __name__ == "__main__":
    sys.exit(main())

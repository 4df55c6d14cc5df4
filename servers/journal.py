"""The journal as an MCP server process: durable saga undo for what an agent did, through MCP tool calls only.

`python -m servers.journal --transport stdio|http [--port N] --data DIR --allow FILE [--retry-max N]
[--retry-base-ms MS] [--call-timeout S]`

`--allow FILE` is the operator's allow-list of the servers an undo may call: `{"servers": {"shop":
"stdio:servers.shop:/var/shop", "payments": {"url": "http://127.0.0.1:9004/mcp", "tools": ["reverse_refund"]},
"memory": {"command": "node", "args": ["server-memory/dist/index.js"], "env": {"MEMORY_FILE_PATH": "m.jsonl"}}}}`
(a name, then `http(s)://...` or `stdio:MODULE[:DATA]`, or an object `{"url"}` / `{"module", "data", "args"}` /
`{"command", "args", "env", "cwd"}`, optionally with the only `tools` an undo may call there). A command is any
stdio MCP server, started as the proxy starts its upstream: with exactly the environment the entry names, its
`cwd` and secret files relative to the allow-list's folder (hatp_mcp.mcp.proxy_upstream, HATP-PXY-50). An agent
registers each undo as `{server, tool, arguments}` naming one of those servers; nothing else can be called, and
no command but the operator's is ever run. State (SQLite)
and the journal's signing key (role `journal`, `public.jwk.json` beside it for `hatp verify`) live under --data;
`--store postgresql://USER@HOST:PORT/DB` keeps the sagas in PostgreSQL instead (`--store sqlite:PATH` elsewhere).
On start it recovers every unfinished saga (policy `resume`: the agent drives its sagas; a step it registered
before a crash and never reported is in doubt, and is left for a person on rollback). Never writes to stdout.

An undo whose tool is approval-gated (`gate_tools`) is approved through the Human Gateway when the journal has
one (`--gateway TARGET --agent-key FILE --org DIR [--approval-wait S] [--approval-poll S]`, HATP-JRN-15): it asks
for exactly that call as the agent the key's Directory-signed card names, waits for the people, and sends the
undo with the signed approval; a refusal, an ended ask or no decision in time leaves the step ROLLBACK_FAILED
with the reason. Without a gateway a gated undo fails at once.

Over HTTP every tool call must carry `Authorization: Bearer <token>` of a caller in `--callers FILE`
(`{"callers": {"agent://acme.com/travel-bot": {"tokenSha256": "<sha256 hex of its token>"}}}`), and acts only on
the sagas that caller began (HATP-JRN-17); the journal refuses to serve HTTP without the file. Over stdio the
parent process is the caller.

Every dead letter is logged on stderr; `--alert-to ADDRESS --org DIR [--alert-link URL]` also sends it to the
people a person or role address names, over the channels their cards list and ORG/gateway.json configures
(HATP-JRN-16).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
from pydantic import ValidationError

from hatp_mcp.core.gateway.agents import card_of_key
from hatp_mcp.core.journal.machine import RetryPolicy
from hatp_mcp.core.model.agent import AgentCard
from hatp_mcp.core.model.proxy_policy import StdioUpstream
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.http_callers import CallerTokens, add_callers_argument, read_callers
from hatp_mcp.mcp.journal_server import McpUndo, agent_tools, serve_journal
from hatp_mcp.mcp.journal_undo_approvals import UndoApprovals
from hatp_mcp.mcp.proxy_upstream import stdio_parameters
from hatp_mcp.mcp.serve import add_server_arguments, log, quiet, serve
from hatp_mcp.mcp.server_links import Target, open_links
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.gateway.delivery.channels import senders_from
from hatp_mcp.runtime.gateway.delivery.settings import load_settings
from hatp_mcp.runtime.gateway.driver import load_org
from hatp_mcp.runtime.gateway.journal_alerts import AlertUndelivered, DeliveredAlert
from hatp_mcp.runtime.journal.driver import Alert, Journal
from hatp_mcp.runtime.org import load_agents
from hatp_mcp.store.url import StoreUrl, open_journal_store
from servers._keys import load_or_create_key

__all__ = ["main", "read_allow_list"]


def read_allow_list(
    path: Path, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Target], dict[str, frozenset[str] | None]]:
    """The servers an undo may call, and for each the tools it may call there (None: any). A `command` entry is
    started with exactly the environment it names (HATP-PXY-50), its values taken from `environ` (default: this
    process's) and owner-only files. Raises ValueError (not an allow-list), HatpError HATP-PXY-50 (a command entry
    of another shape), HATP-PXY-2 (its environment) or OSError."""
    doc = json.loads(path.read_text())
    servers = doc.get("servers") if isinstance(doc, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise ValueError(f'{path}: an allow-list is {{"servers": {{"<name>": "<http(s)://... or stdio:MODULE>"}}}}')
    targets: dict[str, Target] = {}
    tools: dict[str, frozenset[str] | None] = {}
    for name, target in servers.items():
        if not isinstance(target, (str, Mapping)):
            raise ValueError(f"{path}: servers.{name}: a URL, stdio:MODULE[:DATA] or an object")
        listed = target.get("tools") if isinstance(target, Mapping) else None
        if listed is not None and not (isinstance(listed, list) and all(isinstance(t, str) for t in listed)):
            raise ValueError(f"{path}: servers.{name}.tools: a list of the tool names an undo may call")
        if isinstance(target, Mapping) and "command" in target:  # HATP-PXY-50: as the proxy's upstream
            targets[str(name)] = _command_target(path, str(name), target, environ)
        else:
            targets[str(name)] = Target.parse(target)
        tools[str(name)] = frozenset(listed) if listed is not None else None
    return targets, tools


def _command_target(path: Path, name: str, entry: Mapping[str, Any], environ: Mapping[str, str] | None) -> Target:
    """A stdio server the allow-list names by its command: one shape and one way of starting it with the proxy's
    upstream (HATP-PXY-50, HATP-PXY-2). Raises HatpError."""
    where = f"servers.{name}"
    try:
        upstream = StdioUpstream.model_validate({k: v for k, v in entry.items() if k != "tools"})
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(p) for p in first["loc"] if p not in ("EnvFromEnv", "EnvFromFile", "str"))
        raise HatpError(
            "HATP-PXY-50",
            f"{path.name}: {where}: {first['msg']}",
            path=f"{where}.{at}" if at else where,
            code="BAD_ALLOW_LIST",
            fix='a command server is {"command", "args"?, "env"?, "cwd"?, "tools"?}, as a proxy policy\'s upstream',
        ) from None
    return Target(command=stdio_parameters(upstream, path.parent.absolute(), environ, where))


_GATEWAY = "hatp.gateway"  # the gateway's link name: not a name an undo can register (not on the allow-list)


@dataclass(frozen=True)
class GatedUndos:
    """Where gated undos are approved: the gateway, and the journal's agent key with the card that lists it."""

    target: Target
    key: SigningKey
    card: AgentCard


def read_gated(args: argparse.Namespace) -> GatedUndos | None:
    """None without --gateway. Raises ValueError (--gateway without --agent-key and --org, or a key no
    Directory-signed agent card in --org lists) or OSError."""
    if args.gateway is None:
        if args.agent_key:
            raise ValueError("--agent-key goes with --gateway (the gateway that approves gated undos)")
        return None
    if not (args.agent_key and args.org):
        raise ValueError("--gateway needs --agent-key (the journal's agent key) and --org (its agent card)")
    if args.approval_wait <= 0 or args.approval_poll <= 0:
        raise ValueError("--approval-wait and --approval-poll are positive seconds")
    key = SigningKey.from_jwk(json.loads(Path(args.agent_key).read_text()))
    agents, _ignored = load_agents(args.org)
    card = card_of_key(agents, key)
    if card is None:
        raise ValueError(f"--agent-key {key.kid}: no Directory-signed agent card in {args.org} lists this key")
    return GatedUndos(Target.parse(args.gateway), key, card)


def read_alert(args: argparse.Namespace) -> DeliveredAlert | None:
    """None without --alert-to. Raises ValueError (no --org, no delivery settings or channel there, an address
    that names nobody), HatpError (a bad address or gateway.json) or OSError."""
    if args.alert_to is None:
        return None
    if not args.org:
        raise ValueError("--alert-to needs --org (its cards, contacts.json and gateway.json's channels)")
    settings = load_settings(args.org)
    senders = senders_from(settings, SystemClock()) if settings is not None else {}
    if settings is None or not senders:
        raise ValueError(f"--alert-to: {args.org}/gateway.json configures no delivery channel (email, chat, sms)")
    directory, _ignored, contacts = load_org(args.org)
    alert = DeliveredAlert(args.alert_to, directory, contacts, senders, args.alert_link or settings.inbox_url)
    if not alert.people():
        raise ValueError(f"--alert-to {args.alert_to}: no Directory-signed card in {args.org} is named by it")
    return alert


def _alert(delivered: DeliveredAlert | None) -> Alert:
    """Every dead letter on stderr; with --alert-to also to its people (raising when nobody was reached, so the
    dead letter stays unalerted and is sent again when the journal next opens)."""

    async def alert(entry: dict[str, Any]) -> None:
        log(f"journal: DEAD LETTER {json.dumps(entry, sort_keys=True)}")
        if delivered is None:
            return
        try:
            await delivered(entry)
        except AlertUndelivered as exc:
            log(f"journal: alert not delivered (sent again on the next start): {exc}")
            raise
        log(f"journal: alert for {entry.get('sagaId')} sent to {delivered.address}")

    return alert


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servers.journal", description="the journal MCP server (durable saga undo)")
    add_server_arguments(p)
    p.add_argument("--allow", required=True, help="the allow-list JSON of servers an undo may call")
    p.add_argument("--retry-max", type=int, default=5, help="attempts per undo before it is a dead letter")
    p.add_argument("--retry-base-ms", type=int, default=1000, help="the first retry's wait; doubles each time")
    p.add_argument("--call-timeout", type=float, default=30.0, help="seconds an undo call may take")
    p.add_argument(
        "--gateway",
        help="the Human Gateway (http(s)://... or stdio:MODULE[:DATA]) that approves an undo whose tool is gated",
    )
    p.add_argument("--agent-key", help="with --gateway: the journal's agent key (a private JWK)")
    p.add_argument(
        "--org",
        help="the organisation dir: the agent card of --agent-key; the cards, contacts, channels --alert-to uses",
    )
    p.add_argument("--alert-to", help="also send each dead letter to this person or role (human://ORG/role/NAME)")
    p.add_argument("--alert-link", help="with --alert-to: the link in the alert (default: gateway.json's inboxUrl)")
    p.add_argument("--approval-wait", type=float, default=900.0, help="seconds to wait for a gated undo's approval")
    p.add_argument("--approval-poll", type=float, default=2.0, help="seconds between looks at a pending approval")
    add_callers_argument(p)
    p.add_argument(
        "--store",
        help="the journal's sagas: sqlite:PATH (default: sqlite:DATA/journal.db) or postgresql://USER@HOST:PORT/DB",
    )
    return p


async def _run(
    args: argparse.Namespace,
    data: Path,
    store_url: StoreUrl,
    allowed: dict[str, Target],
    tools: dict[str, frozenset[str] | None],
    gated: GatedUndos | None,
    delivered: DeliveredAlert | None,
    callers: CallerTokens | None,
) -> int:
    key = load_or_create_key(data, ["journal"])
    retry = RetryPolicy(max_attempts=args.retry_max, base_ms=args.retry_base_ms, cap_ms=max(60_000, args.retry_base_ms))
    async with contextlib.AsyncExitStack() as stack:
        try:
            store = await stack.enter_async_context(open_journal_store(store_url))
        except (HatpError, OSError, ValueError) as exc:  # HATP-STORE-1/3, unreachable, no psycopg
            log(f"journal: cannot start: {store_url}: {exc}")
            return 2
        targets = dict(allowed)
        if gated is not None:
            targets[_GATEWAY] = gated.target
        links = await stack.enter_async_context(open_links(targets, errlog_dir=data))
        approvals = None
        if gated is not None:
            gateway = links.pop(_GATEWAY)
            wait, poll = timedelta(seconds=args.approval_wait), timedelta(seconds=args.approval_poll)
            approvals = UndoApprovals(gateway, gated.key, gated.card, SystemClock(), wait=wait, poll=poll)
        undoer = McpUndo(links, timeout=args.call_timeout, tools=tools, approvals=approvals)
        # an undo attempt bounds its calls by --call-timeout; a gated one also waits for the people
        bound = args.call_timeout + 5 + (args.call_timeout + args.approval_wait if gated is not None else 0)
        journal = Journal(
            store,
            key,
            tools=agent_tools(undoer),
            retry=retry,
            policy="resume",
            call_timeout=timedelta(seconds=bound),
            author="journal://" + data.name,
            alert=_alert(delivered),
        )
        recovered = await journal.recover()
        for saga_id, status in recovered.items():
            log(f"journal: recovered {saga_id}: {status.value}")
        server = HatpServer("hatp-journal", version="0.1.0", log_level="WARNING")
        serve_journal(server, journal, undoer, callers)
        await serve(server, args.transport, args.port, parent_watch=args.parent_watch)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quiet()
    if args.data is None:
        log("journal: --data DIR is required (the journal keeps its sagas and key there)")
        return 2
    try:
        allowed, tools = read_allow_list(Path(args.allow))
        gated = read_gated(args)
        delivered = read_alert(args)
        callers = read_callers(args, "journal")
        if gated is not None and _GATEWAY in allowed:
            raise ValueError(f"{args.allow}: {_GATEWAY!r} is the gateway's own link name; name that server otherwise")
        store = StoreUrl.parse(args.store) if args.store else StoreUrl.sqlite(Path(args.data) / "journal.db")
        RetryPolicy(max_attempts=args.retry_max, base_ms=args.retry_base_ms, cap_ms=max(60_000, args.retry_base_ms))
    except (OSError, ValueError) as exc:
        log(f"journal: cannot start: {exc}")
        return 2
    except HatpError as exc:
        log(f"journal: cannot start: {exc.one_line()}")
        return 2
    return anyio.run(functools.partial(_run, args, Path(args.data), store, allowed, tools, gated, delivered, callers))


if __name__ == "__main__":
    raise SystemExit(main())

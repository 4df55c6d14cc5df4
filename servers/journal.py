"""The journal as an MCP server process: durable saga undo for what an agent did, through MCP tool calls only.

`python -m servers.journal --transport stdio|http [--port N] --data DIR --allow FILE [--retry-max N]
[--retry-base-ms MS] [--call-timeout S]`

`--allow FILE` is the operator's allow-list of the servers an undo may call: `{"servers": {"shop":
"stdio:servers.shop:/var/shop", "payments": {"url": "http://127.0.0.1:9004/mcp", "tools": ["reverse_refund"]}}}`
(a name, then `http(s)://...` or `stdio:MODULE[:DATA]`, or an object `{"url"}` / `{"module", "data", "args"}`,
optionally with the only `tools` an undo may call there). An agent registers each undo as `{server, tool,
arguments}` naming one of those servers; nothing else can be called and no command is ever run. State (SQLite)
and the journal's signing key (role `journal`, `public.jwk.json` beside it for `hatp verify`) live under --data.
On start it recovers every unfinished saga (policy `resume`: the agent drives its sagas; a step it registered
before a crash and never reported is in doubt, and is left for a person on rollback). Never writes to stdout.
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

import anyio

from hatp_mcp.core.journal.machine import RetryPolicy
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.journal_server import McpUndo, agent_tools, serve_journal
from hatp_mcp.mcp.links import Target, open_links
from hatp_mcp.mcp.serve import add_server_arguments, log, quiet, serve
from hatp_mcp.runtime.journal import Journal
from hatp_mcp.store.journal_store import SqliteJournalStore
from servers._keys import load_or_create_key

__all__ = ["main", "read_allow_list"]


def read_allow_list(path: Path) -> tuple[dict[str, Target], dict[str, frozenset[str] | None]]:
    """The servers an undo may call, and for each the tools it may call there (None: any).
    Raises ValueError (not an allow-list) or OSError."""
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
        targets[str(name)] = Target.parse(target)
        tools[str(name)] = frozenset(listed) if listed is not None else None
    return targets, tools


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servers.journal", description="the journal MCP server (durable saga undo)")
    add_server_arguments(p)
    p.add_argument("--allow", required=True, help="the allow-list JSON of servers an undo may call")
    p.add_argument("--retry-max", type=int, default=5, help="attempts per undo before it is a dead letter")
    p.add_argument("--retry-base-ms", type=int, default=1000, help="the first retry's wait; doubles each time")
    p.add_argument("--call-timeout", type=float, default=30.0, help="seconds an undo call may take")
    return p


async def _run(
    args: argparse.Namespace, data: Path, allowed: dict[str, Target], tools: dict[str, frozenset[str] | None]
) -> int:
    key = load_or_create_key(data, ["journal"])
    store = SqliteJournalStore(data / "journal.db")
    retry = RetryPolicy(max_attempts=args.retry_max, base_ms=args.retry_base_ms, cap_ms=max(60_000, args.retry_base_ms))
    try:
        async with open_links(allowed, errlog_dir=data) as links:
            undoer = McpUndo(links, timeout=args.call_timeout, tools=tools)
            journal = Journal(
                store,
                key,
                tools=agent_tools(undoer),
                retry=retry,
                policy="resume",
                call_timeout=timedelta(seconds=args.call_timeout + 5),
                author="journal://" + data.name,
                alert=lambda entry: log(f"journal: DEAD LETTER {json.dumps(entry, sort_keys=True)}"),
            )
            recovered = await journal.recover()
            for saga_id, status in recovered.items():
                log(f"journal: recovered {saga_id}: {status.value}")
            server = HatpServer("hatp-journal", version="0.1.0", log_level="WARNING")
            serve_journal(server, journal, undoer)
            await serve(server, args.transport, args.port, parent_watch=args.parent_watch)
    finally:
        store.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quiet()
    if args.data is None:
        log("journal: --data DIR is required (the journal keeps its sagas and key there)")
        return 2
    try:
        allowed, tools = read_allow_list(Path(args.allow))
        RetryPolicy(max_attempts=args.retry_max, base_ms=args.retry_base_ms, cap_ms=max(60_000, args.retry_base_ms))
    except (OSError, ValueError) as exc:
        log(f"journal: cannot start: {exc}")
        return 2
    return anyio.run(functools.partial(_run, args, Path(args.data), allowed, tools))


if __name__ == "__main__":
    raise SystemExit(main())

"""The journaling proxy as a process: any MCP server's tools, unchanged, each call journaled and undoable.

`python -m servers.journal_proxy --transport stdio|http [--port N] --data DIR --upstream TARGET --undo-map FILE`

TARGET is the upstream server, as the operator writes it: `http(s)://.../mcp`, `stdio:MODULE[:DATA]` (a Python
module of this repository) or `cmd:<command line>` (any stdio MCP server; split like a shell would, never run
through one). The undo map says which upstream tool undoes which (hatp_mcp/core/journal/undo_map.py). State and
the journal's key (role `journal`) live under --data (`--store postgresql://USER@HOST:PORT/DB`: the sagas in
PostgreSQL); on start it recovers unfinished sagas (policy `rollback`). Over HTTP it needs `--callers FILE` and
refuses every tool call without a caller's bearer token (HATP-JRN-17); its callers share its one current saga, so
give each agent a proxy of its own.
Never writes to stdout (the stdio wire).
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from hatp_mcp.core.journal.undo_map import UndoMap
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.http_callers import CallerTokens, add_callers_argument, caller_middleware, read_callers
from hatp_mcp.mcp.journal_proxy import JournalingProxy
from hatp_mcp.mcp.launch import ROOT, stdio_params
from hatp_mcp.mcp.serve import add_server_arguments, log, quiet, serve
from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.store.url import StoreUrl, open_journal_store
from servers._keys import load_or_create_key

__all__ = ["main", "parse_upstream"]


def parse_upstream(target: str) -> str | StdioServerParameters:
    """A URL, or how to start a stdio server. Raises ValueError for a target that is none of the three forms."""
    if target.startswith(("http://", "https://")):
        return target
    if target.startswith("stdio:") and target[6:]:
        module, _, data = target[6:].partition(":")
        return stdio_params(module, data or None)
    if target.startswith("cmd:") and target[4:].strip():
        argv = shlex.split(target[4:])
        return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
    raise ValueError(f"--upstream {target!r}: http(s)://..., stdio:MODULE[:DATA] or cmd:<command line>")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servers.journal_proxy", description="a journaling MCP proxy (undoable calls)")
    add_server_arguments(p)
    p.add_argument("--upstream", required=True, help="http(s)://..., stdio:MODULE[:DATA] or cmd:<command line>")
    p.add_argument("--undo-map", required=True, help="JSON: which upstream tool undoes which")
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
    undo_map: UndoMap,
    target: str | StdioServerParameters,
    callers: CallerTokens | None,
) -> int:
    key = load_or_create_key(data, ["journal"])
    async with AsyncExitStack() as stack:
        try:
            store = await stack.enter_async_context(open_journal_store(store_url))
        except (HatpError, OSError, ValueError) as exc:  # HATP-STORE-1/3, unreachable, no psycopg
            log(f"journal-proxy: cannot start: {store_url}: {exc}")
            return 2
        if isinstance(target, str):
            client = Client(target)
        else:
            errlog = stack.enter_context((data / "upstream.stderr").open("a"))
            client = Client(stdio_client(target, errlog=errlog))
        upstream = await stack.enter_async_context(client)
        tools = (await upstream.list_tools()).tools
        journal = Journal(store, key, author="journal-proxy://" + data.name)
        proxy = JournalingProxy(upstream, tools, journal, undo_map)
        for saga_id, status in (await journal.recover()).items():
            log(f"journal-proxy: recovered {saga_id}: {status.value}")
        low = proxy.server()
        if callers is not None:  # over HTTP, every tool call carries a caller's token (HATP-JRN-17)
            low.middleware.append(caller_middleware(callers))
        await serve(low, args.transport, args.port, parent_watch=args.parent_watch)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quiet()
    if args.data is None:
        log("journal-proxy: --data DIR is required (the journal keeps its sagas and key there)")
        return 2
    try:
        undo_map = UndoMap.parse(json.loads(Path(args.undo_map).read_text()))
        target = parse_upstream(args.upstream)
        store = StoreUrl.parse(args.store) if args.store else StoreUrl.sqlite(Path(args.data) / "journal.db")
        callers = read_callers(args, "journaling proxy")
    except (OSError, ValueError) as exc:
        log(f"journal-proxy: cannot start: {exc}")
        return 2
    except HatpError as exc:
        log(f"journal-proxy: cannot start: {exc.one_line()}")
        return 2
    Path(args.data).mkdir(parents=True, exist_ok=True)
    return anyio.run(functools.partial(_run, args, Path(args.data), store, undo_map, target, callers))


if __name__ == "__main__":
    raise SystemExit(main())

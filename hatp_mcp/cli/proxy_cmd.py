"""`hatp proxy`: the operator's side of the proxy (servers/journal_proxy.py, spec/proxy.md).

- `hatp proxy sagas --data DIR`: the sagas a proxy's journal holds open (a restart leaves them open, HATP-PXY-9),
  each with its steps, for the model or the operator to complete or roll back;
- `hatp proxy dead-letters --data DIR`: every dead letter, with the reason its step was left for a person
  (HATP-PXY-10).

Both read the journal's store as it is (`--store`, default `sqlite:DIR/journal.db`), without changing it; a running
proxy may hold it open. The sagas' records are checked by `hatp verify`, not here.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio

from hatp_mcp.cli._run import EXIT_OK, fail, print_json
from hatp_mcp.core.journal.machine import SagaMachine
from hatp_mcp.errors import HatpError
from hatp_mcp.store.url import StoreUrl, open_journal_store

HELP = "the proxy's open sagas and dead letters (sagas, dead-letters)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="proxy_command", required=True)
    for name, help_text in (
        ("sagas", "the sagas left open (a restart undoes nothing): complete or roll them back through the proxy"),
        ("dead-letters", "the steps left for a person, each with the reason"),
    ):
        q = sub.add_parser(name, help=help_text, description=help_text)
        q.add_argument("--data", required=True, help="the proxy's --data folder")
        q.add_argument("--store", help="the proxy's --store, when it is not sqlite:DATA/journal.db")


def _store_url(args: argparse.Namespace) -> StoreUrl:
    """Raises ValueError: a bad --store, or no journal under --data (nothing is created)."""
    if args.store:
        return StoreUrl.parse(args.store)
    path = Path(args.data) / "journal.db"
    if not path.is_file():
        raise ValueError(f"{path}: no proxy journal here; give the proxy's --data folder (or its --store)")
    return StoreUrl.sqlite(path)


async def _sagas(url: StoreUrl) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with open_journal_store(url) as store:
        for sid in await store.unfinished():
            stored = await store.load(sid)
            if stored is None:  # pragma: no cover - listed as unfinished, then gone
                continue
            entries = [(e["event"], e["body"]) for e in stored.events]
            machine = SagaMachine.replay(sid, entries)
            out.append(
                {
                    "sagaId": sid,
                    "name": stored.name,
                    "status": machine.status.value,
                    "recovered": any(event == "saga.recovered" for event, _ in entries),
                    "steps": [
                        {"stepId": s.step_id, "tool": s.tool, "state": s.state.value, "args": s.args}
                        for s in machine.steps
                    ],
                }
            )
    return out


async def _dead_letters(url: StoreUrl) -> list[dict[str, Any]]:
    async with open_journal_store(url) as store:
        return [{"id": row.id, **row.entry} for row in await store.dead_letters()]


def run(args: argparse.Namespace) -> int:
    try:
        url = _store_url(args)
        if args.proxy_command == "sagas":
            print_json(anyio.run(_sagas, url))
        else:
            print_json(anyio.run(_dead_letters, url))
    except (OSError, ValueError) as exc:
        return fail(str(exc))
    except HatpError as exc:
        return fail(exc.one_line())
    return EXIT_OK

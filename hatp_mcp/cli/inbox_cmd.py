"""`hatp inbox --data DIR list|show ID|approve ID|reject ID|decline ID|answer ID VALUE --as HUMAN`: the
terminal inbox of a Human Gateway's data dir.

It reads and decides asks in the gateway's store (another process may be running on it); the gateway signs
the outcome when the coordinator next polls. It prints asks and screens only: never contact details.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail, print_json
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.screen import render_ask_text
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.gateway import apply_human_input
from hatp_mcp.store.gateway_store import DB_NAME, GatewayStore, StoredAsk

__all__ = ["HELP", "add_arguments", "run"]

HELP = "the terminal inbox: list pending asks, show a screen, approve, reject, decline or answer"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="the gateway's data dir (holding gateway.db)")
    p.add_argument("--now", help="decide as of this RFC 3339 UTC time (default: the system clock)")
    sub = p.add_subparsers(dest="inbox_command", required=True)
    ls = sub.add_parser("list", help="list pending asks")
    ls.add_argument("--as", dest="human", help="only asks waiting for this person")
    ls.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="show an ask's screen and who was asked")
    show.add_argument("ask_id")
    show.add_argument("--json", action="store_true")
    for verb in ("approve", "reject", "decline"):
        v = sub.add_parser(verb, help=f"{verb} an ask")
        v.add_argument("ask_id")
        v.add_argument("--as", dest="human", required=True, help="who decides, e.g. human://acme.com/alice")
    ans = sub.add_parser("answer", help="answer a choose / form / text ask (a form answer is JSON)")
    ans.add_argument("ask_id")
    ans.add_argument("value")
    ans.add_argument("--as", dest="human", required=True)


def _waiting_for(s: StoredAsk) -> list[str]:
    return [x.human for x in s.record.seats if x.status == "asked"] if s.record else []


def _show(s: StoredAsk) -> None:
    if s.record is None:
        print(f"ask {s.ask_id} was refused: {(s.vote or {}).get('code')} {(s.vote or {}).get('reason')}")
        return
    for line in render_ask_text(s.record.ask):
        print(line)
    print(f"  state: {s.state}")
    for seat in s.record.seats:
        why = f"  {seat.rule} {seat.detail}" if seat.rule else ""
        print(f"  {seat.status:9} {seat.human}{why}")


def run(args: argparse.Namespace) -> int:
    db = Path(args.data) / DB_NAME
    if not db.exists():
        return fail(f"{args.data}: no gateway data here (missing {DB_NAME})")
    try:
        now = parse_ts(args.now) if args.now else datetime.now(UTC)
    except ValueError as exc:
        return fail(f"--now: {exc}")
    store = GatewayStore(db)
    try:
        return _run(args, store, now)
    finally:
        store.close()


def _run(args: argparse.Namespace, store: GatewayStore, now: datetime) -> int:
    cmd = args.inbox_command
    if cmd == "list":
        rows = [s for s in store.asks("pending") if args.human is None or args.human in _waiting_for(s)]
        if args.json:
            print_json(
                [
                    {"askId": s.ask_id, "kind": s.record.ask.kind, "waitingFor": _waiting_for(s)}
                    for s in rows
                    if s.record
                ]
            )
        else:
            for s in rows:
                if s.record:
                    ask = s.record.ask
                    print(
                        f"{s.ask_id}  {ask.kind}  decide by {ask.decide_by}  waiting for {', '.join(_waiting_for(s))}"
                    )
            if not rows:
                print("no pending asks")
        return EXIT_OK
    stored = store.get(args.ask_id)
    if stored is None:
        return fail(f"no ask {args.ask_id!r} in {args.data}")
    if cmd == "show":
        if args.json:
            print_json(stored.record.ask.wire() if stored.record else stored.vote)
        else:
            _show(stored)
        return EXIT_OK
    value: Any = None
    if cmd == "answer":
        value = args.value
        if stored.record is not None and stored.record.ask.kind == "form":
            try:
                value = json.loads(args.value)
            except ValueError:
                return fail('a form answer is a JSON object, e.g. \'{"costCenter": "CC-0042"}\'', EXIT_BAD_INPUT)
    try:
        after = apply_human_input(store, args.ask_id, args.human, cmd, value, now)
    except HatpError as exc:
        return fail(exc.one_line(), EXIT_PROBLEMS)
    print(f"{cmd} by {args.human} recorded on {args.ask_id}: the ask is {after.state}")
    return EXIT_OK

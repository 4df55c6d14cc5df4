"""`hatp inbox --data DIR list|show ID|approve ID|reject ID|decline ID|answer ID VALUE --as HUMAN --key FILE`:
the terminal inbox of a Human Gateway's data dir.

It reads asks in the gateway's store (another process may be running on it). A decision is signed here, with the
person's own key (`--key`, their private JWK: the `ed25519` key on their card), previewed against the ask's rules
(so a person who may not decide hears why at once), and left in the store as a signed proof; the gateway verifies
it against the cards on its next sync and only then does it count (spec/gateway.md, HATP-GW-19..26). This module
never decides for the gateway and prints asks, screens and proofs only: never contact details.
"""

from __future__ import annotations

import argparse
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, InputError, fail, print_json, read_signing_key
from hatp_mcp.core.gateway.machine import tick
from hatp_mcp.core.gateway.proof import apply_decision, sign_decision, subject_digest
from hatp_mcp.core.gateway.screen import render_ask_text
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.evidence import HumanDecisionProof
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.wire import load_json
from hatp_mcp.errors import HatpError
from hatp_mcp.store.gateway_store import DB_NAME, GatewayStore, StoredAsk
from hatp_mcp.store.url import StoreUrl, open_gateway_store

__all__ = ["HELP", "add_arguments", "run"]

HELP = "the terminal inbox: list pending asks, show a screen, approve, reject, decline or answer"


def add_arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", help="the gateway's data dir (holding gateway.db)")
    where.add_argument("--store", help="the gateway's store URL instead: postgresql://USER@HOST:PORT/DB")
    p.add_argument("--now", help="decide as of this RFC 3339 UTC time (default: the system clock)")
    sub = p.add_subparsers(dest="inbox_command", required=True)
    ls = sub.add_parser("list", help="list pending asks")
    ls.add_argument("--as", dest="human", help="only asks waiting for this person")
    ls.add_argument("--json", action="store_true")
    show = sub.add_parser("show", help="show an ask's screen and who was asked")
    show.add_argument("ask_id")
    show.add_argument("--json", action="store_true")
    for verb in ("approve", "reject", "decline", "answer"):
        v = sub.add_parser(
            verb,
            help="answer a choose / form / text ask (a form answer is JSON)" if verb == "answer" else f"{verb} an ask",
        )
        v.add_argument("ask_id")
        if verb == "answer":
            v.add_argument("value")
        v.add_argument("--as", dest="human", required=True, help="who decides, e.g. human://acme.com/alice")
        v.add_argument("--key", required=True, help="your private JWK (the ed25519 key on your card) to sign with")


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


def _show_proofs(store: GatewayStore, ask_id: str) -> None:
    for p in store.proofs(ask_id):
        why = f"  {p.rule} {p.reason}" if p.rule else ""
        print(f"  proof {p.status:9} {p.proof.get('human')} {p.proof.get('decision')}{why}")


def _preview(store: GatewayStore, rec: AskRecord, proof: HumanDecisionProof, now: datetime) -> None:
    """Raise the core's refusal if `proof` could not count once the proofs already waiting are applied."""
    rec = tick(rec, now)
    for left in store.proofs(rec.ask.ask_id, "submitted"):
        try:
            rec = apply_decision(rec, HumanDecisionProof.model_validate(left.proof), now)
        except (HatpError, ValueError):
            continue  # the gateway will refuse that one; it does not stand in this person's way
    apply_decision(rec, proof, now)


def run(args: argparse.Namespace) -> int:
    db = Path(args.data or ".") / DB_NAME
    if args.store is None and not db.exists():
        return fail(f"{args.data}: no gateway data here (missing {DB_NAME})")
    try:
        now = parse_ts(args.now) if args.now else datetime.now(UTC)
    except ValueError as exc:
        return fail(f"--now: {exc}")
    try:
        store = open_gateway_store(StoreUrl.parse(args.store) if args.store else StoreUrl.sqlite(db))
    except (HatpError, OSError, ValueError) as exc:
        return fail(f"{args.store or db}: {exc}")
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
            _show_proofs(store, args.ask_id)
        return EXIT_OK
    if stored.record is None:
        return fail(f"ask {args.ask_id} was refused at routing; nothing to decide", EXIT_PROBLEMS)
    value: Any = None
    if cmd == "answer":
        value = args.value
        if stored.record.ask.kind == "form":
            try:
                value = load_json(args.value.encode("utf-8", "surrogatepass"), "--value")
            except HatpError as exc:
                return fail(f'{exc.one_line()}; a form answer is a JSON object, e.g. \'{{"costCenter": "CC-0042"}}\'')
    try:
        key = read_signing_key(args.key)
    except InputError as exc:
        return fail(f"--key: {exc}")
    ask = stored.record.ask
    try:
        proof = sign_decision(
            key,
            ask.ask_id,
            subject_digest(ask),
            args.human,
            cmd,
            now,
            nonce=secrets.token_urlsafe(18),
            value=value,
            terms=ask.terms,
        )
    except (ValueError, HatpError) as exc:  # HatpError: a value with no canonical form (HATP-CANON-2)
        return fail(f"cannot sign this decision: {exc}".splitlines()[0])
    try:
        _preview(store, stored.record, proof, now)
    except HatpError as exc:
        return fail(exc.one_line(), EXIT_PROBLEMS)
    store.submit_proof(ask.ask_id, proof.wire())
    print(f"{cmd} by {args.human} on {args.ask_id} signed with key {key.kid} and left for the gateway:")
    print("  it counts once the gateway verifies it against your card (see `hatp inbox show`)")
    return EXIT_OK

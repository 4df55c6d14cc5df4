"""`hatp inbox --data DIR list|show ID|approve ID|reject ID [--reason TEXT]|decline ID|answer ID VALUE --as HUMAN
--key FILE`: the terminal inbox of a Human Gateway's data dir.

It reads asks in the gateway's store (another process may be running on it). A decision is signed here, with the
person's own key (`--key`, their private JWK: the `ed25519` key on their card), checked against their card when
the organisation is known (`--org`, or the one whose gateway data dir `--data` is: a key not on the card is
refused at once, exit 1, with its rule), previewed against the ask's rules (so a person who may not decide hears
why at once), and left in the store as a signed proof; the gateway verifies
it against the cards on its next sync and only then does it count (spec/gateway.md, HATP-GW-19..26). This module
never decides for the gateway and prints asks, screens and proofs only: never contact details.

What it prints reads as the notices do (HATP-GW-92): each time in this machine's zone (or `--tz`) and in UTC, with
"in N min" from `--now`; people by the display name on their card (with the address a command takes), when the
organisation is known.
"""

from __future__ import annotations

import argparse
import secrets
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from hatp_mcp.cli._run import (
    EXIT_OK,
    EXIT_PROBLEMS,
    InputError,
    fail,
    print_json,
    read_signing_key,
)
from hatp_mcp.cli.org_layout import OrgLayout
from hatp_mcp.core.gateway.machine import tick
from hatp_mcp.core.gateway.proof import HumanKeys, apply_decision, sign_decision, subject_digest, verify_proof
from hatp_mcp.core.gateway.screen import person_words, render_ask_text
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.evidence import HumanDecisionProof
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.model.wire import load_json
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.org import load_directory
from hatp_mcp.store.gateway_store import DB_NAME, GatewayStore, StoredAsk
from hatp_mcp.store.url import StoreUrl, open_gateway_store

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", help="the gateway's data dir (holding gateway.db)")
    where.add_argument("--store", help="the gateway's store URL instead: postgresql://USER@HOST:PORT/DB")
    p.add_argument("--now", help="decide as of this RFC 3339 UTC time (default: the system clock)")
    p.add_argument("--tz", help="show times in this zone, an IANA name such as Europe/Berlin (default: this machine's)")
    p.add_argument(
        "--org",
        help="the organisation dir whose cards a decision is checked against before it is left (default: the one "
        "whose gateway data dir --data is, as hatp init-org lays it out)",
    )
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
        if verb == "reject":
            v.add_argument("--reason", help="why, in a sentence: signed with your decision, the agent reads it")
        v.add_argument("--as", dest="human", required=True, help="who decides, e.g. human://acme.com/alice")
        v.add_argument("--key", required=True, help="your private JWK (the ed25519 key on your card) to sign with")


def _waiting_for(s: StoredAsk) -> list[str]:
    return [x.human for x in s.record.seats if x.status == "asked"] if s.record else []


class _Words:
    """How the terminal inbox names people and times (HATP-GW-92)."""

    def __init__(self, names: dict[str, str], now: datetime, zone: tzinfo | None) -> None:
        self.names, self.now, self.zone = names, now, zone

    def who(self, address: str) -> str:
        return person_words(address, self.names)

    def when(self, ts: str) -> str:
        """`2026-11-29 15:00 CET / 2026-11-29 14:00 UTC (in 3 h 55 min)`: local first, then as the notices say it."""
        try:
            at = parse_ts(ts)
        except ValueError:
            return ts
        utc = when_words(ts, self.now)
        local = at.astimezone(self.zone)
        if local.utcoffset() == UTC.utcoffset(None):
            return utc
        return f"{local.strftime('%Y-%m-%d %H:%M %Z')} / {utc}"


def _show(s: StoredAsk, words: _Words) -> None:
    if s.record is None:
        print(f"ask {s.ask_id} was refused: {(s.vote or {}).get('code')} {(s.vote or {}).get('reason')}")
        return
    for line in render_ask_text(s.record.ask, names=words.names, when=words.when):
        print(line)
    print(f"  state: {s.state}")
    for seat in s.record.seats:
        why = f"  {seat.rule} {seat.detail}" if seat.rule else ""
        print(f"  {seat.status:9} {words.who(seat.human)}{why}")


def _show_proofs(store: GatewayStore, ask_id: str, words: _Words) -> None:
    for p in store.proofs(ask_id):
        why = f"  {p.rule} {p.reason}" if p.rule else ""
        print(f"  proof {p.status:9} {words.who(str(p.proof.get('human')))} {p.proof.get('decision')}{why}")


def _names(args: argparse.Namespace) -> dict[str, str]:
    """Display names by address from the organisation's signed cards; none when the organisation is not known or
    its cards cannot be read (the addresses are shown then)."""
    org = _org_of(args)
    if org is None:
        return {}
    try:
        directory, _ignored = load_directory(org)
    except (OSError, ValueError, HatpError):
        return {}
    return {card.id: card.display_name for card in directory.cards()}


def _org_of(args: argparse.Namespace) -> Path | None:
    """The organisation whose cards decide who signs (`--org`, else the one whose gateway data dir `--data` is)."""
    if args.org is not None:
        return Path(args.org)
    if args.data is None:
        return None
    data = Path(args.data).resolve()
    root = data.parent.parent
    if OrgLayout(root).data("gateway").resolve() == data and OrgLayout(root).well_known.exists():
        return root
    return None


def _check_signer(args: argparse.Namespace, rec: AskRecord, proof: HumanDecisionProof, now: datetime) -> None:
    """HATP-GW-20/21: with the organisation known, the proof must verify against the person's card now, as the
    gateway will check it: a key not on their card is refused here, not left to fail later. Raises HatpError."""
    org = _org_of(args)
    if org is None:
        return
    try:
        directory, _ignored = load_directory(org)
    except (OSError, ValueError) as exc:
        raise HatpError(
            "HATP-GW-20", f"{org}: cannot read the organisation's cards: {exc}", path="$.proof", code="NO_CARDS"
        ) from exc
    verify_proof(proof.wire(), ask=rec.ask, humans=HumanKeys.from_cards(directory.cards()), now=now, nonce_used=False)


def _preview(
    store: GatewayStore, rec: AskRecord, proof: HumanDecisionProof, now: datetime, names: dict[str, str]
) -> None:
    """Raise the core's refusal if `proof` could not count once the proofs already waiting are applied; it names
    people by `names`, as the gateway would (HATP-GW-97)."""
    rec = tick(rec, now, names)
    for left in store.proofs(rec.ask.ask_id, "submitted"):
        try:
            rec = apply_decision(rec, HumanDecisionProof.model_validate(left.proof), now, names=names)
        except (HatpError, ValueError):
            continue  # the gateway will refuse that one; it does not stand in this person's way
    apply_decision(rec, proof, now, names=names)


def run(args: argparse.Namespace) -> int:
    db = Path(args.data or ".") / DB_NAME
    if args.store is None and not db.exists():
        return fail(f"{args.data}: no gateway data here (missing {DB_NAME})")
    try:
        now = parse_ts(args.now) if args.now else datetime.now(UTC)
    except ValueError as exc:
        return fail(f"--now: {exc}")
    try:
        zone: tzinfo | None = ZoneInfo(args.tz) if args.tz else None
    except (ZoneInfoNotFoundError, ValueError) as exc:
        return fail(f"--tz: {args.tz!r} is not a time zone name such as Europe/Berlin ({exc})")
    try:
        store = open_gateway_store(StoreUrl.parse(args.store) if args.store else StoreUrl.sqlite(db))
    except (HatpError, OSError, ValueError) as exc:
        return fail(f"{args.store or db}: {exc}")
    try:
        return _run(args, store, now, _Words(_names(args), now, zone))
    finally:
        store.close()


def _run(args: argparse.Namespace, store: GatewayStore, now: datetime, words: _Words) -> int:
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
                    waiting = ", ".join(words.who(x) for x in _waiting_for(s))
                    print(f"{s.ask_id}  {ask.kind}  decide by {words.when(ask.decide_by)}  waiting for {waiting}")
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
            _show(stored, words)
            _show_proofs(store, args.ask_id, words)
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
            reason=getattr(args, "reason", None),
        )
    except (ValueError, HatpError) as exc:  # HatpError: a value with no canonical form (HATP-CANON-2)
        return fail(f"cannot sign this decision: {exc}".splitlines()[0])
    try:
        _check_signer(args, stored.record, proof, now)
        _preview(store, stored.record, proof, now, words.names)
    except HatpError as exc:
        return fail(exc.one_line(), EXIT_PROBLEMS)
    store.submit_proof(ask.ask_id, proof.wire())
    print(f"{cmd} by {words.who(args.human)} on {args.ask_id} signed with key {key.kid} and left for the gateway:")
    print("  it counts once the gateway verifies it against your card (see `hatp inbox show`)")
    return EXIT_OK

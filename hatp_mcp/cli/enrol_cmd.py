"""`hatp enrol`: the operator's side of passkey enrolment (spec/gateway.md HATP-GW-71).

- `hatp enrol code --data GATEWAY_DIR --human H [--hours 24] [--inbox-url URL]`: a one-time enrolment code for
  person H (stored hashed in the gateway's inbox.db); prints it, and the link to give them when --inbox-url is set.
- `hatp enrol list --data GATEWAY_DIR`: the registrations the inbox verified, pending, approved or refused, each
  with how it was allowed (`authorized_by`: the operator's code, or the card's passkey that asserted it, HATP-GW-86).
- `hatp enrol approve SEQ --data GATEWAY_DIR --org ORG --key DIRECTORY_KEY`: put registration SEQ's passkey on the
  person's card in ORG/cards and re-sign the card with the Directory's key; the new card is checked against the
  organisation's well-known document before it is written (a key the well-known does not publish as the
  Directory's makes a card nobody trusts: refused, nothing written). A running gateway uses the card at once
  (HATP-GW-82).
- `hatp enrol refuse SEQ --data GATEWAY_DIR`.
Only the operator holding the Directory key can approve: the gateway never signs cards.

With `--org DIR` (an organisation `hatp init-org` made) the rest defaults from its layout: `--data` is
DIR/data/gateway, `--inbox-url` the `inboxUrl` of DIR/gateway.json, and `--key` DIR/private/directory.private.jwk.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hatp_mcp.cli._run import (
    EXIT_OK,
    EXIT_PROBLEMS,
    InputError,
    fail,
    print_json,
    read_json,
    read_object,
    read_signing_key,
)
from hatp_mcp.cli.org_layout import OrgLayout
from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.signing.keys import sign_object, unsigned
from hatp_mcp.store.inbox_state import InboxState


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="enrol_command", required=True)
    code = sub.add_parser("code", help="issue a one-time enrolment code for a person")
    code.add_argument("--data", help="the gateway's data dir (default with --org: DIR/data/gateway)")
    code.add_argument("--org", help="an organisation dir made by hatp init-org: --data and --inbox-url from it")
    code.add_argument("--human", required=True, help="the person's human:// id")
    code.add_argument("--hours", type=float, default=24.0, help="how long the code is valid")
    code.add_argument("--inbox-url", help="print the enrolment link on this inbox")
    ls = sub.add_parser("list", help="the registrations the inbox verified")
    ls.add_argument("--data")
    ls.add_argument("--org", help="an organisation dir made by hatp init-org: --data from it")
    ok = sub.add_parser("approve", help="put a registration's passkey on the card, re-signed by the Directory")
    ok.add_argument("seq", type=int)
    ok.add_argument("--data", help="the gateway's data dir (default with --org: DIR/data/gateway)")
    ok.add_argument("--org", required=True, help="the organisation dir (.well-known, cards)")
    ok.add_argument("--key", help="the Directory's private JWK (default: DIR/private/directory.private.jwk.json)")
    no = sub.add_parser("refuse", help="refuse a registration")
    no.add_argument("seq", type=int)
    no.add_argument("--data")
    no.add_argument("--org", help="an organisation dir made by hatp init-org: --data from it")


def _defaults(args: argparse.Namespace) -> str | None:
    """Fill --data, --inbox-url and --key from an organisation `hatp init-org` made. Returns what is missing."""
    if args.org is not None:
        layout = OrgLayout(Path(args.org))
        if args.data is None:
            args.data = str(layout.data("gateway"))
        if getattr(args, "key", "") is None:
            args.key = str(layout.directory_key)
        if getattr(args, "inbox_url", "") is None and layout.gateway_settings.exists():
            url = read_object(str(layout.gateway_settings), "the gateway settings").get("inboxUrl")
            if url is not None and not isinstance(url, str):
                raise InputError(f"HATP-MCP-52: {layout.gateway_settings} at $.inboxUrl: the inbox's URL is a string")
            args.inbox_url = url
    return "--data GATEWAY_DIR (or --org DIR)" if args.data is None else None


def _approve(state: InboxState, seq: int, org: Path, key_file: str) -> int:
    pending = next((e for e in state.enrolments("pending") if e.seq == seq), None)
    if pending is None:
        return fail(f"no pending enrolment {seq}", EXIT_PROBLEMS)
    key = read_signing_key(key_file)
    well_known = read_object(str(org / ".well-known" / "human-card.json"), "the well-known document")
    for path in sorted((org / "cards").glob("*.json")):
        doc = read_json(str(path))
        if isinstance(doc, dict) and doc.get("id") == pending.human:
            break
    else:
        return fail(f"no card for {pending.human} in {org / 'cards'}", EXIT_PROBLEMS)
    body = unsigned(doc)
    entry = {"type": "passkey", "id": pending.credential_id, "publicKey": pending.public_key}
    body["keys"] = [*body.get("keys", []), entry]
    body["issuedAt"] = format_ts(datetime.now(UTC))
    card = sign_object(body, key)
    directory, ignored = Directory.load(well_known, [card])
    if directory.card(pending.human) is None:
        why = ignored[0].rule + " " + ignored[0].reason if ignored else "not trusted"
        return fail(f"the re-signed card would not be trusted ({why}); nothing written", EXIT_PROBLEMS)
    path.write_text(json.dumps(card, indent=1) + "\n")
    state.settle_enrolment(seq, "approved")
    print(f"enrolment {seq}: {pending.human}'s card now lists passkey {pending.credential_id} ({path})")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    try:
        missing = _defaults(args)
    except InputError as exc:
        return fail(str(exc))
    if missing is not None:
        return fail(f"give {missing}")
    data = Path(args.data)
    if not data.is_dir():
        return fail(f"{data}: not a gateway data dir")
    state = InboxState(data)
    try:
        if args.enrol_command == "code":
            code = secrets.token_urlsafe(24)
            expires = format_ts(datetime.now(UTC) + timedelta(hours=args.hours))
            state.add_enrol_code(hashlib.sha256(code.encode()).hexdigest(), args.human, expires)
            print(f"{args.inbox_url.rstrip('/')}/enrol?code={code}" if args.inbox_url else code)
            return EXIT_OK
        if args.enrol_command == "list":
            print_json([_row(e) for e in state.enrolments()])
            return EXIT_OK
        if args.enrol_command == "refuse":
            state.settle_enrolment(args.seq, "refused")
            return EXIT_OK
        return _approve(state, args.seq, Path(args.org), args.key)
    except InputError as exc:
        return fail(str(exc))
    except (OSError, ValueError) as exc:
        return fail(str(exc))
    finally:
        state.close()


def _row(e: object) -> dict[str, object]:
    keys = ("seq", "human", "credential_id", "public_key", "registered_at", "state", "authorized_by")
    return {k: getattr(e, k) for k in keys}

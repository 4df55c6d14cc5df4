"""`hatp verify RECORD.json --keys KEYRING.json [--json] [--open]`: check a Transaction Record offline."""

from __future__ import annotations

import argparse

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, InputError, fail, print_json, read_json
from hatp_mcp.core.keys import Keyring
from hatp_mcp.core.record import verify_record

HELP = "verify a Transaction Record offline: chain, signatures, plan digests, closure"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("record", help="the record JSON file")
    p.add_argument("--keys", required=True, help="keyring JSON (a JWKS whose keys list their roles)")
    p.add_argument("--json", action="store_true", help="print {ok, problems} as JSON")
    p.add_argument("--open", action="store_true", help="accept a record that is not closed yet (in progress)")


def run(args: argparse.Namespace) -> int:
    try:
        ring_doc = read_json(args.keys)
        record = read_json(args.record)
    except InputError as exc:
        return fail(str(exc))
    if not isinstance(ring_doc, dict):
        return fail(f"{args.keys}: a keyring is a JSON object with a 'keys' array")
    try:
        ring = Keyring.from_jwks(ring_doc)
    except ValueError as exc:
        return fail(f"{args.keys}: {exc}")
    if not isinstance(record, dict):
        return fail(f"{args.record}: a record is a JSON object")
    problems = verify_record(record, ring, require_closed=not args.open)
    if args.json:
        print_json({"ok": not problems, "problems": [p.to_dict() for p in problems]})
    elif problems:
        for p in problems:
            where = "record" if p.index < 0 else f"event {p.index}"
            print(f"✗ {p.rule}  {where}  {p.reason}")
    else:
        n = len(record.get("events", []))
        print(f"✓ record {record.get('txnId')} holds: {n} events, chain and signatures verified")
    return EXIT_PROBLEMS if problems else EXIT_OK

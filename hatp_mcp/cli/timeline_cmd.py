"""`hatp timeline RECORD.json --keys KEYRING.json [--org DIR] --out FILE.html`: a finished transaction as a sequence
diagram (hatp_mcp/web/timeline.py), with each event's check result from the same checks `hatp verify` makes.
Writes the page either way; exits 0 when the record holds, 1 when it has problems (drawn as ✗ with the rule)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, InputError, fail, read_json
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.org import load_human_keys
from hatp_mcp.web.timeline import render_timeline


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("record")
    p.add_argument("--keys", required=True, help="keyring (JWKS) of the coordinator, servers and gateway")
    p.add_argument("--org", help="organisation dir: also check each person's own proof against the cards")
    p.add_argument("--out", required=True, help="where to write the HTML page")


def run(args: argparse.Namespace) -> int:
    try:
        ring_doc, record = read_json(args.keys), read_json(args.record)
        if not isinstance(ring_doc, dict) or not isinstance(record, dict):
            raise InputError("a keyring and a record are JSON objects")
        ring = Keyring.from_jwks(ring_doc)
        humans = load_human_keys(args.org) if args.org else None
    except InputError as exc:
        return fail(str(exc))
    except HatpError as exc:
        return fail(f"{args.org}: {exc.rule}: {exc.reason}")
    except (OSError, ValueError) as exc:
        return fail(str(exc))
    problems = verify_record(record, ring, humans=humans)
    try:
        Path(args.out).write_text(render_timeline(record, problems))
    except OSError as exc:
        return fail(f"{args.out}: cannot write: {exc.strerror or exc}")
    events = record.get("events")
    print(f"{args.out}: {len(events) if isinstance(events, list) else 0} events, {len(problems)} problem(s)")
    return EXIT_PROBLEMS if problems else EXIT_OK

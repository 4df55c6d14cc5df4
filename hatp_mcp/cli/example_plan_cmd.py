"""`hatp example-plan [--now TS] [--txn-id ID]`: a fresh trip plan to begin or to edit (core.model.example_plan).

A plan's times must lie ahead of the clock that checks it (HATP-VAL-9), so an example is made when it is asked
for, never kept in a file. Exit 0 with the plan as JSON on stdout, 2 for a bad --now or --txn-id.
"""

from __future__ import annotations

import argparse
import json
import sys

from pydantic import ValidationError

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, fail
from hatp_mcp.cli.validate_cmd import parse_now
from hatp_mcp.core.model.example_plan import example_txn_id, trip_plan

__all__ = ["HELP", "add_arguments", "run"]

HELP = "print a fresh example plan (the acme.com test organisation's trip), its times made from now"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--now", metavar="ISO-8601", help="make the plan's times from this time (default: the real clock)")
    p.add_argument("--txn-id", metavar="ID", help="the plan's txnId (default: txn-trip-<the time, to the second>)")


def run(args: argparse.Namespace) -> int:
    try:
        now = parse_now(args.now).replace(microsecond=0)
    except ValueError as exc:
        return fail(str(exc), EXIT_BAD_INPUT)
    try:
        plan = trip_plan(now, args.txn_id or example_txn_id(now))
    except ValidationError as exc:
        return fail(f"--txn-id {args.txn_id!r}: {exc.errors(include_url=False)[0]['msg']}", EXIT_BAD_INPUT)
    print(json.dumps(plan.wire(), indent=2, ensure_ascii=False))
    print("hatp example-plan: the trip of the TEST-ONLY organisation acme.com (spec/fixtures/org)", file=sys.stderr)
    return EXIT_OK

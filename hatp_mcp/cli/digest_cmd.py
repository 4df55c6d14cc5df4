"""`hatp digest PLAN.json`: print the plan digest (sha256 of the canonical wire form)."""

from __future__ import annotations

import argparse

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, InputError, fail, read_model
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import CanonicalError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", help="the plan JSON file")


def run(args: argparse.Namespace) -> int:
    try:
        plan = read_model(args.plan, Plan)
    except InputError as exc:
        return fail(str(exc))
    try:
        print(plan.digest())
    except CanonicalError as exc:  # read and parsed, but it has no canonical form, so no digest
        return fail(f"{args.plan}: {exc.one_line()}", EXIT_PROBLEMS)
    return EXIT_OK

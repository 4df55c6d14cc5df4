"""`hatp validate PLAN.json [--json] [--now ISO-8601]`: the static plan checker, for HATP plans and saga artifacts.

Exit 0 valid, 1 violations (all of them are printed, not the first), 2 unreadable input or a bad --now (with
`--json`, an unreadable input is also printed as {"ok": false, "error": {"rule", "reason"}}).
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, InputError, fail, print_json, read_json
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.clockfit import clock_fit
from hatp_mcp.core.validate.validator import validate_document
from hatp_mcp.runtime.clock import SystemClock

__all__ = ["add_arguments", "parse_now", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", help="the plan JSON file (HATP plan or saga artifact; the kind is detected)")
    p.add_argument("--json", action="store_true", help='print {"ok", "kind", "violations"} as JSON')
    p.add_argument("--now", metavar="ISO-8601", help="validate as of this time (default: the real clock)")


def parse_now(text: str | None) -> datetime:
    """The --now value as an aware UTC datetime. Raises ValueError for text that is not an ISO-8601 time with
    a zone (naive times are ambiguous)."""
    if text is None:
        return SystemClock().now()
    raw = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        when = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ValueError(f"--now {text!r} is not an ISO-8601 time such as 2026-12-01T09:00:00Z") from exc
    if when.tzinfo is None:
        raise ValueError(f"--now {text!r} has no time zone; add Z or an offset such as +01:00")
    try:
        return when.astimezone(UTC)
    except OverflowError as exc:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise ValueError(
            f"--now {text!r} falls outside years 1..9999 once moved to UTC; give a time inside them"
        ) from exc


def run(args: argparse.Namespace) -> int:
    try:
        now = parse_now(args.now)
    except ValueError as exc:
        return fail(str(exc), EXIT_BAD_INPUT)
    try:
        value = read_json(args.plan)
        try:
            report = validate_document(value, now)
        except ValueError as exc:
            raise InputError(f"HATP-MCP-52: {args.plan}: {exc}") from exc
    except InputError as exc:
        if args.json:  # HATP-MCP-52: a caller that asked for JSON gets JSON, with the exit code and the line
            print_json({"ok": False, "kind": None, "violations": [], "error": exc.to_dict()})
        return fail(str(exc))
    if args.json:
        print_json(report.to_dict())
    elif report.violations:
        for v in report.violations:
            print(f"✗ {v.rule}  {v.path}  {v.message}")
        n = len(report.violations)
        print(f"{args.plan}: {n} violation{'s' if n != 1 else ''} ({report.kind})")
    else:
        extra = ""
        if report.kind == "hatp":
            fit = clock_fit(Plan.model_validate(value), now)
            extra = f"; modes that fit: {', '.join(fit.fits) or 'none'}"
        print(f"✓ {args.plan}: valid {'HATP plan' if report.kind == 'hatp' else 'saga artifact'}{extra}")
    return EXIT_PROBLEMS if report.violations else EXIT_OK

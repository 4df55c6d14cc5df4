"""`hatp conformance participant|gateway (--command CMD | --url URL) ...`: check another implementation.

Runs the participant (or Human Gateway) checks (hatp_mcp/conformance) against any MCP server that claims HATP and
prints the report: each check's rule id, what was sent, what was expected, what came back. Exit 0 only when every
check ran and passed, 1 when one failed or was skipped, 2 when the call was wrong or the server could not be
reached. The runner is a coordinator with its own key under `--keys DIR` (a fresh temporary directory by default);
`{trust}` in the command is replaced by the trust list naming it. Without a target it only writes that identity
and prints the trust list's path, for a server to be started by hand and then checked by URL.
"""

from __future__ import annotations

import argparse
import functools
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, fail, print_json
from hatp_mcp.conformance.gateway import GatewayOptions, run_gateway_checks
from hatp_mcp.conformance.participant import ParticipantOptions, run_participant_checks
from hatp_mcp.conformance.report import Report
from hatp_mcp.conformance.target import TRUST_PLACEHOLDER, Identity, Target, open_identity
from hatp_mcp.conformance.wire import run_wire_checks
from hatp_mcp.core.model.wire import load_json
from hatp_mcp.errors import HatpError


def _target_arguments(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--command",
        dest="target_command",  # not `command`: the top-level parser keeps the subcommand's name there
        help="start the server over stdio with this command line (split like a shell, never run by one); "
        "{trust} is replaced by the runner's trusted-coordinators file",
    )
    where.add_argument("--url", help="a streamable HTTP server already running, trusting --keys DIR's coordinator")
    p.add_argument(
        "--keys",
        help="the runner's coordinator key and trust list (DIR/key.jwk.json, DIR/trusted-coordinators.json); "
        "created if absent; default: a fresh temporary directory",
    )
    p.add_argument("--timeout", type=float, default=20.0, help="seconds to wait for each answer (default 20)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="role", required=True)
    part = sub.add_parser("participant", help="check a participant (a tool server wrapped with serve_hatp or alike)")
    _target_arguments(part)
    part.add_argument("--participant", help="the participant's URI (branch `participant`, the votes' `voter`)")
    part.add_argument("--operation", help="the advertised operation to use (default: the first hold, else the first)")
    part.add_argument(
        "--args",
        default="{}",
        help="the branch's args as a JSON object; {txn} in a string becomes each transaction's id (default {})",
    )
    gw = sub.add_parser("gateway", help="check a Human Gateway (asks are withdrawn at once; no one decides)")
    _target_arguments(gw)
    gw.add_argument("--address", help="the requirement's human:// address, one the gateway routes")
    gw.add_argument("--action", default="conformance.check", help="the requirement's action")
    gw.add_argument("--requester", help="the plan's requester (default human://ORG/hatp-conformance-requester)")


def _options(args: argparse.Namespace) -> ParticipantOptions | GatewayOptions | str:
    """The role's options, or what is wrong with the call."""
    if args.role == "gateway":
        if not args.address:
            return "--address is required: the human:// address of the requirement the gateway is asked about"
        return GatewayOptions(args.address, args.action, args.requester, args.timeout)
    try:
        parsed: Any = load_json(args.args.encode("utf-8", "surrogatepass"), "--args")
    except HatpError as exc:
        return exc.one_line()
    if not isinstance(parsed, dict):
        return "--args: must be a JSON object"
    if not args.participant:
        return "--participant URI is required: the runner names it as the branch's participant"
    return ParticipantOptions(args.participant, args.operation, parsed, args.timeout)


def run(args: argparse.Namespace) -> int:
    has_target = args.target_command is not None or args.url is not None
    options = _options(args) if has_target else None
    if isinstance(options, str):
        return fail(options)
    with tempfile.TemporaryDirectory(prefix="hatp-conformance-") as scratch:
        try:
            identity = open_identity(Path(args.keys) if args.keys else Path(scratch))
        except (OSError, ValueError) as exc:
            return fail(f"--keys: {exc}")
        if options is None:
            if not args.keys:
                return fail("give --command or --url (or --keys DIR alone to write the runner's identity)")
            print(identity.trust_file)
            return EXIT_OK
        try:
            target = (
                Target.from_command(args.target_command, identity.trust_file)
                if args.target_command is not None
                else Target(url=args.url)
            )
        except ValueError as exc:
            return fail(f"--command: {exc}")
        if args.target_command is not None and TRUST_PLACEHOLDER not in args.target_command:
            print(
                f"hatp: note: --command has no {TRUST_PLACEHOLDER}; the server must already trust the runner's key "
                f"({identity.trust_file})",
                file=sys.stderr,
            )
        report = Report(target.describe(), args.role)
        errlog = Path(scratch) / "server.stderr"
        try:
            anyio.run(_check, target, identity, options, report, errlog)
        except (OSError, ExceptionGroup, TimeoutError) as exc:  # the server could not be started or reached
            tail = errlog.read_text(errors="replace")[-400:] if errlog.exists() else ""
            return fail(f"cannot reach {target.describe()}: {exc!r}" + (f"; its stderr: {tail}" if tail else ""))
    if args.json:
        print_json(report.to_json())
    else:
        print(report.to_text())
    return EXIT_OK if report.ok else EXIT_PROBLEMS


async def _check(
    target: Target, identity: Identity, options: ParticipantOptions | GatewayOptions, report: Report, log: Path
) -> None:
    with log.open("w") as errlog:
        with anyio.fail_after(options.timeout * 40):  # a bound on the whole run: a server that hangs is no answer
            async with target.connect(errlog) as client:
                now = functools.partial(datetime.now, UTC)
                if isinstance(options, GatewayOptions):
                    await run_gateway_checks(client, identity, options, report, now)
                else:
                    await run_participant_checks(client, identity, options, report, now)
            await run_wire_checks(target, report, errlog, options.timeout)

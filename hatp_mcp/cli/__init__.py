"""`hatp`: the command line. Each subcommand lives in its own module (add_arguments, run); COMMANDS names the
module and holds its one line of help, so listing the subcommands imports none of them.

This package is the one place where core errors become exit codes and one-line messages (see _run.py):
exit 0 success, 1 the input was read and something is wrong with it (violations, problems), 2 it could not be
read or the call was wrong. Never a traceback. May import every other part of hatp_mcp; nothing imports it.

- __main__.py: `python -m hatp_mcp.cli`, the `hatp` console script;
- _run.py: shared plumbing: reading input files into wire objects, printing errors as one line on stderr;
- validate_cmd.py: `hatp validate`, the static plan checker, for HATP plans and saga artifacts;
- digest_cmd.py: `hatp digest`, a plan's digest (sha256 of its canonical wire form);
- example_plan_cmd.py: `hatp example-plan`, a trip plan made fresh, so that its times lie ahead of the clock;
- verify_cmd.py: `hatp verify`, a Transaction Record or a saga's journal record checked offline;
- evidence_cmd.py: `hatp evidence`, the votes and receipts a participant signed for one transaction, exported;
- timeline_cmd.py: `hatp timeline`, a finished transaction as a sequence diagram with each event's check;
- keys_cmd.py: `hatp keys`, a new private Ed25519 JWK, or a keyring of public keys bound to their parties;
- trust_cmd.py: `hatp trust add`, the operator's step that pins public keys, each bound to its party;
- init_org_cmd.py: `hatp init-org`, a new organisation directory with its keys, settings and demo servers;
- org_cmd.py: `hatp org wrap`, a third-party MCP server added to an organisation behind the proxy;
- org_layout.py: an organisation directory as `hatp init-org` lays it out, and making one;
- card_cmd.py: `hatp card`, a Directory-signed person or agent card in an organisation directory;
- enrol_cmd.py: `hatp enrol`, the operator's side of passkey enrolment (codes, registrations, approval);
- inbox_cmd.py: `hatp inbox`, the terminal inbox: a person signs their own decision with their own key;
- mcp_config_cmd.py: `hatp mcp-config`, the Claude Desktop `mcpServers` entries for the suite;
- serve_cmd.py: `hatp serve`, the organisation's servers as one supervised local service on loopback;
- serve_unit.py: `hatp serve --install`, that service as a systemd user unit;
- connect_cmd.py: `hatp connect`, the stdio bridge from a client that starts a command to that service;
- conformance_cmd.py: `hatp conformance`, the conformance checks run against another implementation;
- proxy_cmd.py: `hatp proxy`, the proxy's open sagas, dead letters, policy check and starter policies;
- schemas_cmd.py: `hatp schemas`, the JSON Schemas in spec/schemas/ written or checked from the models;
- vectors_cmd.py: `hatp vectors`, the interop vectors in spec/vectors/ written or checked from fixed inputs;
- vector_keys.py: the interop vectors' test-only keys, derived from their names so anyone can rebuild them;
- vector_record.py: the interop vectors of a whole signed Transaction Record and of approvals.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hatp_mcp.cli._run import InputError, fail
from hatp_mcp.errors import HatpError

__all__ = ["COMMANDS", "Subcommand", "main"]


@dataclass(frozen=True, slots=True)
class Subcommand:
    """Where a subcommand lives (the module holding its add_arguments and run) and its one line of help."""

    module: str
    help: str


# name -> its Subcommand. Add a subcommand by adding its module here. A module is imported only when its subcommand
# runs: each starts with what it uses alone, and `hatp --help` (or a typo) lists every name importing none.
COMMANDS: dict[str, Subcommand] = {
    "verify": Subcommand(
        "verify_cmd",
        "verify a Transaction Record offline: chain, signatures, plan digests, closure, and that it proves its outcome",
    ),
    "evidence": Subcommand(
        "evidence_cmd",
        "export a participant's own signed votes and receipts for one transaction (for hatp verify --evidence)",
    ),
    "digest": Subcommand("digest_cmd", "print a plan's digest, sha256:<hex> of its canonical form"),
    "keys": Subcommand("keys_cmd", "make Ed25519 signing keys (JWK) and keyrings"),
    "schemas": Subcommand("schemas_cmd", "write or check the JSON Schemas generated from the wire models"),
    "vectors": Subcommand(
        "vectors_cmd",
        "write or check the interop vectors in spec/vectors/ (canonical JSON, digests, keys, evidence, a record)",
    ),
    "validate": Subcommand(
        "validate_cmd",
        "check a plan before anything runs: a HATP plan or an apology-protocol saga artifact",
    ),
    "example-plan": Subcommand(
        "example_plan_cmd",
        "print a fresh example plan (the acme.com test organisation's trip), its times made from now",
    ),
    "inbox": Subcommand(
        "inbox_cmd",
        "the terminal inbox: list pending asks, show a screen, approve, reject, decline or answer",
    ),
    "enrol": Subcommand(
        "enrol_cmd",
        "passkey enrolment: issue codes, list registrations, approve one onto the Directory-signed card",
    ),
    "timeline": Subcommand(
        "timeline_cmd",
        "draw a Transaction Record as a sequence diagram (HTML with SVG), each signature's check result on it",
    ),
    "init-org": Subcommand(
        "init_org_cmd",
        "make an organisation directory: Directory and Gateway keys, empty cards, gateway settings, pinned keys",
    ),
    "org": Subcommand(
        "org_cmd",
        "change an organisation: wrap a third-party MCP server behind the proxy (hatp org wrap DIR NAME POLICY)",
    ),
    "card": Subcommand(
        "card_cmd",
        "issue a Directory-signed card (a person, or the agent Claude Desktop acts as) in an organisation dir",
    ),
    "trust": Subcommand(
        "trust_cmd",
        "pin public keys (participants', coordinators') into a pin file or trust list, bound to their party",
    ),
    "mcp-config": Subcommand(
        "mcp_config_cmd",
        "print the Claude Desktop mcpServers JSON for the HATP server suite (absolute paths)",
    ),
    "conformance": Subcommand(
        "conformance_cmd",
        "check that another implementation's MCP server speaks HATP: a report by rule id",
    ),
    "serve": Subcommand(
        "serve_cmd",
        "run the organisation's servers as one local service (loopback HTTP), restarting any that dies",
    ),
    "connect": Subcommand(
        "connect_cmd",
        "relay a client's stdio MCP to one server of the organisation's service (starting the service if needed)",
    ),
    "proxy": Subcommand(
        "proxy_cmd",
        "the proxy's open sagas and dead letters, what shadow mode let through, its policy's status, a policy "
        "checked, starter policies (sagas, dead-letters, shadow, status, end, check, init)",
    ),
}


def _command(name: str) -> Any:
    return importlib.import_module(f"hatp_mcp.cli.{COMMANDS[name].module}")


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="hatp", description="HATP, the Human-Agent Transaction Protocol")
    sub = parser.add_subparsers(dest="command", required=True)
    if args_in and args_in[0] in COMMANDS:  # the subcommand named first is the only one built, and imported
        name = args_in[0]
        add: Callable[[argparse.ArgumentParser], None] = _command(name).add_arguments
        add(sub.add_parser(name, help=COMMANDS[name].help, description=COMMANDS[name].help))
    else:  # --help, a typo, nothing: every name with its line of help, no module imported
        for name, command in COMMANDS.items():
            sub.add_parser(name, help=command.help)
    try:
        args = parser.parse_args(args_in)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    run: Callable[[argparse.Namespace], int] = _command(args.command).run
    try:
        return run(args)
    except InputError as exc:  # HATP-MCP-52: the backstop for a file a subcommand did not refuse itself
        return fail(str(exc))
    except HatpError as exc:
        return fail(exc.one_line())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

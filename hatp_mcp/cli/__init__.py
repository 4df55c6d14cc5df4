"""`hatp`: the command line. Each subcommand lives in its own module and registers itself in COMMANDS.

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
from typing import Any

from hatp_mcp.cli._run import InputError, fail
from hatp_mcp.errors import HatpError

__all__ = ["COMMANDS", "main"]

# name -> the module that holds it (its HELP, add_arguments and run). Add a subcommand by adding its module here.
# A module is imported only when its subcommand runs (or for `hatp --help`): each starts with what it uses alone.
COMMANDS: dict[str, str] = {
    "verify": "verify_cmd",
    "evidence": "evidence_cmd",
    "digest": "digest_cmd",
    "keys": "keys_cmd",
    "schemas": "schemas_cmd",
    "vectors": "vectors_cmd",
    "validate": "validate_cmd",
    "example-plan": "example_plan_cmd",
    "inbox": "inbox_cmd",
    "enrol": "enrol_cmd",
    "timeline": "timeline_cmd",
    "init-org": "init_org_cmd",
    "org": "org_cmd",
    "card": "card_cmd",
    "trust": "trust_cmd",
    "mcp-config": "mcp_config_cmd",
    "conformance": "conformance_cmd",
    "serve": "serve_cmd",
    "connect": "connect_cmd",
    "proxy": "proxy_cmd",
}


def _command(name: str) -> Any:
    return importlib.import_module(f"hatp_mcp.cli.{COMMANDS[name]}")


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="hatp", description="HATP, the Human-Agent Transaction Protocol")
    sub = parser.add_subparsers(dest="command", required=True)
    # The subcommand named first is the only one built; anything else (--help, a typo) builds them all.
    names = [args_in[0]] if args_in and args_in[0] in COMMANDS else list(COMMANDS)
    for name in names:
        module = _command(name)
        add: Callable[[argparse.ArgumentParser], None] = module.add_arguments
        add(sub.add_parser(name, help=module.HELP, description=module.HELP))
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

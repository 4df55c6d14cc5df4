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
- org_layout.py: an organisation directory as `hatp init-org` lays it out, and making one;
- card_cmd.py: `hatp card`, a Directory-signed person or agent card in an organisation directory;
- enrol_cmd.py: `hatp enrol`, the operator's side of passkey enrolment (codes, registrations, approval);
- inbox_cmd.py: `hatp inbox`, the terminal inbox: a person signs their own decision with their own key;
- mcp_config_cmd.py: `hatp mcp-config`, the Claude Desktop `mcpServers` entries for the suite;
- conformance_cmd.py: `hatp conformance`, the conformance checks run against another implementation;
- schemas_cmd.py: `hatp schemas`, the JSON Schemas in spec/schemas/ written or checked from the models;
- vectors_cmd.py: `hatp vectors`, the interop vectors in spec/vectors/ written or checked from fixed inputs;
- vector_keys.py: the interop vectors' test-only keys, derived from their names so anyone can rebuild them;
- vector_record.py: the interop vectors of a whole signed Transaction Record and of approvals.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from hatp_mcp.cli import (
    card_cmd,
    conformance_cmd,
    digest_cmd,
    enrol_cmd,
    evidence_cmd,
    example_plan_cmd,
    inbox_cmd,
    init_org_cmd,
    keys_cmd,
    mcp_config_cmd,
    schemas_cmd,
    timeline_cmd,
    trust_cmd,
    validate_cmd,
    vectors_cmd,
    verify_cmd,
)
from hatp_mcp.cli._run import InputError, fail
from hatp_mcp.errors import HatpError

__all__ = ["COMMANDS", "main"]

# name -> (add_arguments, run). Add a subcommand by adding its module here.
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "verify": (verify_cmd.HELP, verify_cmd.add_arguments, verify_cmd.run),
    "evidence": (evidence_cmd.HELP, evidence_cmd.add_arguments, evidence_cmd.run),
    "digest": (digest_cmd.HELP, digest_cmd.add_arguments, digest_cmd.run),
    "keys": (keys_cmd.HELP, keys_cmd.add_arguments, keys_cmd.run),
    "schemas": (schemas_cmd.HELP, schemas_cmd.add_arguments, schemas_cmd.run),
    "vectors": (vectors_cmd.HELP, vectors_cmd.add_arguments, vectors_cmd.run),
    "validate": (validate_cmd.HELP, validate_cmd.add_arguments, validate_cmd.run),
    "example-plan": (example_plan_cmd.HELP, example_plan_cmd.add_arguments, example_plan_cmd.run),
    "inbox": (inbox_cmd.HELP, inbox_cmd.add_arguments, inbox_cmd.run),
    "enrol": (enrol_cmd.HELP, enrol_cmd.add_arguments, enrol_cmd.run),
    "timeline": (timeline_cmd.HELP, timeline_cmd.add_arguments, timeline_cmd.run),
    "init-org": (init_org_cmd.HELP, init_org_cmd.add_arguments, init_org_cmd.run),
    "card": (card_cmd.HELP, card_cmd.add_arguments, card_cmd.run),
    "trust": (trust_cmd.HELP, trust_cmd.add_arguments, trust_cmd.run),
    "mcp-config": (mcp_config_cmd.HELP, mcp_config_cmd.add_arguments, mcp_config_cmd.run),
    "conformance": (conformance_cmd.HELP, conformance_cmd.add_arguments, conformance_cmd.run),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hatp", description="HATP, the Human-Agent Transaction Protocol")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add, _run) in COMMANDS.items():
        add(sub.add_parser(name, help=help_text, description=help_text))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    _help, _add, run = COMMANDS[args.command]
    try:
        return run(args)
    except InputError as exc:  # HATP-MCP-52: the backstop for a file a subcommand did not refuse itself
        return fail(str(exc))
    except HatpError as exc:
        return fail(exc.one_line())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""`hatp trust add PINFILE PARTY=KEYFILE... [--role ROLE]`: pin public keys, each bound to the party it speaks for.

The operator's step that makes trust explicit (spec/mcp-binding.md HATP-MCP-37): a participant's public key into
the pin file a coordinator reads (`--participant-keys URI=PINFILE`, an organisation's `trust/NAME.jwks.json`), or
a coordinator's public key into a receiver's trust list (`DATA/trusted-coordinators.json`, role coordinator,
HATP-TRUST-10). KEYFILE is a public JWK (a server's `public.jwk.json`, a key someone published), a JWKS, or a
private JWK (only its public half is taken). `--role` requires each key to carry that role. A key already pinned
for the same party changes nothing (the file is not rewritten); one that conflicts with a pinned key (its kid with
other bytes, or bound to another party) is refused and nothing is written. Servers never write these files.
Exit 0 (prints what was added), 1 (refused: a conflict, a missing role), 2 (a bad call or an unreadable file).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, InputError, fail, read_json
from hatp_mcp.cli.keys_cmd import public_entries, split_party
from hatp_mcp.core.signing.keys import ROLES, PublicKeyEntry
from hatp_mcp.errors import HatpError
from hatp_mcp.store.pin_file import add_pins

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="trust_command", required=True)
    add = sub.add_parser("add", help="pin keys into PINFILE (created if absent)")
    add.add_argument("pin_file", metavar="PINFILE", help="the JWKS pin file or trust list")
    add.add_argument("keys", nargs="+", metavar="PARTY=KEYFILE", help="PARTY: the URI the key speaks for")
    add.add_argument("--role", choices=sorted(ROLES), help="every key must carry this role")


def run(args: argparse.Namespace) -> int:
    entries: list[PublicKeyEntry] = []
    for arg in args.keys:
        party, path = split_party(arg)
        if party is None:
            return fail(f"{arg!r}: give PARTY=KEYFILE (PARTY a URI such as mcp://shop.example/hatp)", EXIT_BAD_INPUT)
        try:
            found = public_entries(read_json(path))
            entries += [e.with_party(party) for e in found]
        except InputError as exc:
            return fail(str(exc))
        except ValueError as exc:
            return fail(f"{path}: {exc}")
        for entry in found:
            if args.role is not None and args.role not in entry.roles:
                return fail(f"{path}: key {entry.kid!r} lacks the role {args.role!r}; nothing written", EXIT_PROBLEMS)
    try:
        added = add_pins(Path(args.pin_file), entries)
    except HatpError as exc:
        return fail(exc.one_line(), EXIT_PROBLEMS)
    except (OSError, ValueError) as exc:
        return fail(f"{args.pin_file}: {exc}")
    for entry in added:
        print(f"pinned {entry.kid} for {entry.party} in {args.pin_file}")
    if not added:
        print(f"already pinned in {args.pin_file}; unchanged")
    return EXIT_OK

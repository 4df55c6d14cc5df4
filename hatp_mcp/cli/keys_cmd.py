"""`hatp keys new --out FILE [--role R ...]`: write a private Ed25519 JWK (mode 0600), print the public JWK.

`hatp keys ring [PARTY=]FILE... ` prints a keyring (JWKS) of the public halves of key files, each bound to the
PARTY it speaks for when given (HATP-SIG-6): `hatp verify` counts a participant's or the gateway's evidence toward
an outcome only from a key bound to that party (HATP-REC-11).
"""

from __future__ import annotations

import argparse
import json
import os

from hatp_mcp.cli._run import EXIT_OK, InputError, fail, print_json, read_json
from hatp_mcp.core.evidence.keys import ROLES, Keyring, SigningKey

HELP = "make Ed25519 signing keys (JWK) and keyrings"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="keys_command", required=True)
    new = sub.add_parser("new", help="write a new private key file (0600) and print its public JWK")
    new.add_argument("--out", required=True, help="where to write the private JWK; must not exist")
    new.add_argument("--role", action="append", default=[], choices=sorted(ROLES), help="a role it signs for")
    new.add_argument("--kid", help="key id (default: a thumbprint of the public key)")
    ring = sub.add_parser("ring", help="print a keyring (JWKS) of the public halves of key files")
    ring.add_argument(
        "files",
        nargs="+",
        metavar="[PARTY=]FILE",
        help="a private key file; PARTY= (a URI such as mcp://hotel.example/hatp) binds the key to that party",
    )


def write_private_key(path: str, key: SigningKey) -> None:
    """Create `path` with mode 0600 (never overwriting) and write the private JWK. Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(key.private_jwk(), f, indent=2)
        f.write("\n")


def run(args: argparse.Namespace) -> int:
    if args.keys_command == "new":
        key = SigningKey.generate(args.role, kid=args.kid)
        try:
            write_private_key(args.out, key)
        except OSError as exc:
            return fail(f"{args.out}: cannot create: {exc.strerror or exc}")
        print_json(key.public_jwk())
        return EXIT_OK
    ring = Keyring()
    for arg in args.files:
        party, sep, path = arg.partition("=")
        if not sep or "://" not in party:
            party, path = "", arg
        try:
            doc = read_json(path)
            if not isinstance(doc, dict):
                raise InputError(f"{path}: a key file is a JSON object")
            ring.add_signer(SigningKey.from_jwk(doc), party or None)
        except (InputError, ValueError) as exc:
            return fail(f"{path}: {exc}" if isinstance(exc, ValueError) else str(exc))
    print_json(ring.to_jwks())
    return EXIT_OK

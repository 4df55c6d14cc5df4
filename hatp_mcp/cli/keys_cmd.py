"""`hatp keys new --out FILE [--role R ...]`: write a private Ed25519 JWK (mode 0600), print the public JWK. `--role
person` (the role approver) makes a person's decision key: put it on their card (`hatp card person --update
--decision-key FILE`) and decide with it (`hatp inbox approve ... --key FILE`).

`hatp keys ring [PARTY=]FILE...` prints a keyring (JWKS) of public keys, for `hatp verify --keys` or a
coordinator's pins. Each FILE is a private JWK (only its public half is taken, after checking that the two
match), a public JWK (such as the `public.jwk.json` a server writes, or a key someone published) or a JWKS; with
`PARTY=` (a URI such as mcp://airline.example/hatp=airline.jwk) each of its keys is bound to the party it speaks
for (HATP-SIG-6): `hatp verify` counts a participant's or the gateway's evidence toward an outcome only from a
key bound to that party (HATP-REC-11). Private material never reaches the output.
"""

from __future__ import annotations

import argparse
import json
import os

from hatp_mcp.cli._run import EXIT_OK, InputError, fail, print_json, read_json
from hatp_mcp.core.signing.keys import ROLES, Keyring, PublicKeyEntry, SigningKey

PERSON = "person"  # a person's decision key: the role approver, as a card's ed25519 key is checked


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="keys_command", required=True)
    new = sub.add_parser("new", help="write a new private key file (0600) and print its public JWK")
    new.add_argument("--out", required=True, help="where to write the private JWK; must not exist")
    new.add_argument(
        "--role",
        action="append",
        default=[],
        choices=sorted(ROLES | {PERSON}),
        help="a role it signs for; `person` (the same as approver): a person's decision key, for their card's "
        "--decision-key and hatp inbox --key",
    )
    new.add_argument("--kid", help="key id (default: a thumbprint of the public key)")
    ring = sub.add_parser("ring", help="print a keyring (JWKS) of public keys from private or public JWKs or JWKS")
    ring.add_argument(
        "files",
        nargs="+",
        metavar="[PARTY=]FILE",
        help="a private JWK, a public JWK or a JWKS; PARTY= (a URI) binds its keys to the party they speak for",
    )


def write_private_key(path: str, key: SigningKey) -> None:
    """Create `path` with mode 0600 (never overwriting) and write the private JWK. Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(key.private_jwk(), f, indent=2)
        f.write("\n")


def run(args: argparse.Namespace) -> int:
    if args.keys_command == "new":
        key = SigningKey.generate(sorted({"approver" if r == PERSON else r for r in args.role}), kid=args.kid)
        try:
            write_private_key(args.out, key)
        except OSError as exc:
            return fail(f"{args.out}: cannot create: {exc.strerror or exc}")
        print_json(key.public_jwk())
        return EXIT_OK
    ring = Keyring()
    for arg in args.files:
        party, path = split_party(arg)
        try:
            doc = read_json(path)
            for entry in public_entries(doc):
                ring.add(entry.with_party(party) if party is not None else entry)
        except InputError as exc:
            return fail(str(exc))
        except ValueError as exc:
            return fail(f"{path}: {exc}")
    print_json(ring.to_jwks())
    return EXIT_OK


def split_party(arg: str) -> tuple[str | None, str]:
    """`URI=FILE` -> (URI, FILE); a plain FILE (even one whose name holds '=') -> (None, FILE)."""
    party, sep, path = arg.partition("=")
    return (party, path) if sep and "://" in party else (None, arg)


def public_entries(doc: object) -> list[PublicKeyEntry]:
    """The public keys a key file holds: a JWKS's every key, a public JWK, or a private JWK's public half.

    Raises ValueError naming what is wrong (a private JWK whose halves do not match, a key that is no Ed25519
    JWK, a JWKS entry that is wrong)."""
    if not isinstance(doc, dict):
        raise ValueError('a key file is a JSON object: a JWK or a JWKS {"keys": [...]}')
    if "keys" in doc:
        return Keyring.from_jwks(doc).entries()
    if "d" in doc:
        return [PublicKeyEntry.from_jwk(SigningKey.from_jwk(doc).public_jwk(doc.get("party")))]
    return [PublicKeyEntry.from_jwk(doc)]

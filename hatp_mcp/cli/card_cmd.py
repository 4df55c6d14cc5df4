"""`hatp card person|agent --org DIR NAME ...`: issue a Directory-signed card in an organisation directory.

- `hatp card person --org DIR NAME --display "Ann Lee" [--role R]... [--authority ACTION=AMOUNT:CUR]...
  [--email ADDR] [--decision-key FILE] [--timezone TZ] [--sla-seconds S]`: the Human Card of human://ORG/NAME in
  DIR/cards (channels: the inbox, and email when --email is given; the address goes to the gateway's private
  DIR/contacts.json, never onto the card). `--decision-key` puts an Ed25519 public key (a public or private JWK;
  only the public half is taken) on the card for signed decisions; a passkey comes later by enrolment in the web
  inbox (`hatp enrol`). `--update` re-signs the existing card with the options given and keeps the rest: its
  passkeys, its other decision keys, its delegates (a new `--decision-key` of a kid already there replaces it).
- `hatp card agent --org DIR NAME --acts-for PERSON [--display TEXT]`: the agent card of agent://ORG/NAME, acting
  for human://ORG/PERSON, with a new agent key in DIR/private/agents/NAME.private.jwk.json (0600). The coordinator
  `hatp mcp-config --org` configures holds it and signs plans as that agent (HATP-TXN-21).

Each card is signed with the Directory's key (DIR/private/directory.private.jwk.json) and checked against the
organisation's well-known document before anything is written; an existing card is never overwritten (except by
`--update`, which re-signs it). The
gateway, the Directory and the coordinator read the cards when they start. Exit 0, 1 (refused: a card that would
not be trusted, or exists), 2 (a bad call or an unreadable file).
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_PROBLEMS,
    InputError,
    fail,
    read_json,
    read_object,
    read_signing_key,
)
from hatp_mcp.cli.keys_cmd import public_entries
from hatp_mcp.cli.org_layout import OrgLayout
from hatp_mcp.core.gateway.agents import AgentKeys
from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.signing.keys import SigningKey, b64u, sign_object, unsigned
from hatp_mcp.errors import HatpError
from hatp_mcp.store.files import create_file, replace_file

__all__ = ["add_arguments", "run"]

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
AUTHORITY = re.compile(r"^([^=]+)=(\d+(?:\.\d+)?):([A-Z]{3})$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="card_command", required=True)
    person = sub.add_parser("person", help="a person's Human Card (human://ORG/NAME)")
    person.add_argument("name", help="the short name: human://ORG/NAME")
    person.add_argument("--org", required=True, help="the organisation dir (made by hatp init-org)")
    person.add_argument("--display", help="the person's name as people read it (required unless --update)")
    person.add_argument(
        "--update",
        action="store_true",
        help="re-sign the existing card with the options given, keeping the rest (its passkeys too)",
    )
    person.add_argument("--role", action="append", default=[], help="a role, e.g. finance-approver (repeatable)")
    person.add_argument(
        "--authority", action="append", default=[], help="ACTION=AMOUNT:CUR, e.g. travel.spend=5000:USD (repeatable)"
    )
    person.add_argument("--email", help="their email address (kept in the gateway's private contacts.json)")
    person.add_argument("--decision-key", help="a JWK file whose Ed25519 public key they sign decisions with")
    person.add_argument("--timezone", help="their time zone (default UTC)")
    person.add_argument("--sla-seconds", type=int, help="how long they usually take to decide (default 3600)")
    agent = sub.add_parser("agent", help="an agent card (agent://ORG/NAME) and the agent's new key")
    agent.add_argument("name", help="the short name: agent://ORG/NAME")
    agent.add_argument("--org", required=True, help="the organisation dir (made by hatp init-org)")
    agent.add_argument("--acts-for", required=True, help="the short name of the person it acts for")
    agent.add_argument("--display", help="its name as people read it (default: NAME)")


def _card_key(file: str) -> dict[str, str]:
    (entry, *more) = public_entries(read_json(file))
    if more:
        raise ValueError(f"{file}: give one key, not a JWKS of {1 + len(more)}")
    return {"type": "ed25519", "id": entry.kid, "publicKey": b64u(entry.raw())}


def _authority(items: list[str]) -> list[dict[str, Any]]:
    authority = []
    for item in items:
        m = AUTHORITY.fullmatch(item)
        if m is None:
            raise ValueError(f"--authority {item!r}: give ACTION=AMOUNT:CUR, e.g. travel.spend=5000:USD")
        authority.append({"action": m[1], "maxAmount": [{"value": m[2], "currency": m[3]}]})
    return authority


def _person(args: argparse.Namespace, org: str, issuer: str) -> dict[str, Any]:
    return {
        "type": "hatp.card",
        "id": f"human://{org}/{args.name}",
        "displayName": args.display,
        "roles": list(args.role),
        "skills": [],
        "authority": _authority(args.authority),
        "channels": [*([{"type": "email"}] if args.email else []), {"type": "inbox"}],
        "availability": {"timezone": args.timezone or "UTC", "status": "available"},
        "sla": {"decideSeconds": args.sla_seconds if args.sla_seconds is not None else 3600},
        "capacity": {"maxOpen": 10, "open": 0},
        "delegates": [],
        "keys": [_card_key(args.decision_key)] if args.decision_key else [],
        "issuer": issuer,
        "issuedAt": format_ts(datetime.now(UTC).replace(microsecond=0)),
    }


def _updated(args: argparse.Namespace, old: dict[str, Any], issuer: str) -> dict[str, Any]:
    """The existing card `old` with what the options give, everything else kept (its passkeys, delegates,
    capacity, other decision keys); a --decision-key of a kid already on the card replaces that key."""
    body = unsigned(old)
    if args.display is not None:
        body["displayName"] = args.display
    if args.role:
        body["roles"] = list(args.role)
    if args.authority:
        body["authority"] = _authority(args.authority)
    if args.email and not any(c.get("type") == "email" for c in body.get("channels", [])):
        body["channels"] = [{"type": "email"}, *body.get("channels", [])]
    if args.timezone is not None:
        body["availability"] = dict(body.get("availability", {})) | {"timezone": args.timezone}
    if args.sla_seconds is not None:
        body["sla"] = dict(body.get("sla", {})) | {"decideSeconds": args.sla_seconds}
    if args.decision_key:
        key = _card_key(args.decision_key)
        body["keys"] = [k for k in body.get("keys", []) if k.get("id") != key["id"]] + [key]
    body["issuer"] = issuer
    body["issuedAt"] = format_ts(datetime.now(UTC).replace(microsecond=0))
    return body


def run(args: argparse.Namespace) -> int:
    layout = OrgLayout(Path(args.org))
    if not NAME.fullmatch(args.name):
        return fail(f"{args.name!r}: a short name is lowercase letters, digits, '.', '_' or '-'", EXIT_BAD_INPUT)
    try:
        well_known = read_object(str(layout.well_known), "the well-known document")
        directory_key = read_signing_key(str(layout.directory_key))
        org, issuer = well_known.get("organization"), well_known.get("directory")
        if not isinstance(org, str) or not isinstance(issuer, str):
            raise InputError(f"HATP-MCP-52: {layout.well_known}: organization and directory are strings")
        if args.card_command == "person":
            target = layout.cards / f"{args.name}.json"
            if args.update:
                if not target.exists():
                    return fail(f"no card {target} to update: issue it first (without --update)", EXIT_PROBLEMS)
                body = _updated(args, read_json(str(target)), issuer)
            elif args.display is None:
                return fail("--display is required for a new card (the person's name as people read it)")
            else:
                body = _person(args, org, issuer)
            card = sign_object(body, directory_key)
            _trusted, ignored = Directory.load(well_known, [card])
        else:
            if args.display is None:
                args.display = args.name
            agent_key = SigningKey.generate(["agent"])
            body = {
                "type": "hatp.agent-card",
                "id": f"agent://{org}/{args.name}",
                "displayName": args.display,
                "actsFor": f"human://{org}/{args.acts_for}",
                "keys": [{"type": "ed25519", "id": agent_key.kid, "publicKey": b64u(agent_key.public_raw())}],
                "issuer": issuer,
                "issuedAt": format_ts(datetime.now(UTC).replace(microsecond=0)),
            }
            if not (layout.cards / f"{args.acts_for}.json").exists():
                why = f"no card for human://{org}/{args.acts_for}: add it first (hatp card person)"
                return fail(why, EXIT_PROBLEMS)
            card = sign_object(body, directory_key)
            _agents, ignored = AgentKeys.load(well_known, [card])
            target = layout.agents / f"{args.name}.json"
        if ignored:
            return fail(
                f"the card would not be trusted ({ignored[0].rule} {ignored[0].reason}); nothing written", EXIT_PROBLEMS
            )
        updating = args.card_command == "person" and args.update
        if target.exists() and not updating:
            why = "a card is never overwritten (re-sign it with --update); nothing written"
            return fail(f"{target} exists: {why}", EXIT_PROBLEMS)
        if args.card_command == "agent":
            key_file = layout.agent_keys / f"{args.name}.private.jwk.json"
            if not create_file(key_file, json.dumps(agent_key.private_jwk(), indent=2) + "\n", 0o600):
                return fail(f"{key_file} exists; nothing written", EXIT_PROBLEMS)
        elif args.email:
            contacts = read_object(str(layout.contacts), "the contacts") if layout.contacts.exists() else {}
            contacts[card["id"]] = {"email": args.email}
            replace_file(layout.contacts, json.dumps(contacts, indent=2) + "\n", 0o600)
        if updating:
            replace_file(target, json.dumps(card, indent=1) + "\n", 0o644)
        elif not create_file(target, json.dumps(card, indent=1) + "\n", 0o644):
            return fail(f"{target} exists: a card is never overwritten", EXIT_PROBLEMS)
    except InputError as exc:
        return fail(str(exc))
    except HatpError as exc:  # the well-known document cannot check a card (HATP-CARD-3): nothing written
        return fail(f"{layout.well_known}: {exc.one_line()}")
    except (KeyError, ValueError) as exc:
        return fail(f"{args.org}: {exc}", EXIT_BAD_INPUT)
    except OSError as exc:
        return fail(f"{args.org}: {exc.strerror or exc}", EXIT_BAD_INPUT)
    print(f"{card['id']}: {target}")
    return EXIT_OK

"""`hatp example-plan [--now TS] [--txn-id ID] [--org DIR [--agent NAME]]`: a fresh trip plan to begin or to edit
(core.model.example_plan).

A plan's times must lie ahead of the clock that checks it (HATP-VAL-9), so an example is made when it is asked
for, never kept in a file. Without `--org` it is the TEST-ONLY acme.com organisation's trip. With `--org` (an
organisation made by hatp init-org) it is that organisation's: asked by the person its agent card acts for
(`--agent NAME` when it has several), through that agent, for a finance approver of its own, and booking inventory
of its own each time (another seat, room and calendar slot), so it can be begun again and again. Exit 0 with the
plan as JSON on stdout, 1 for an organisation without (that) agent card, 2 for a bad --now, --txn-id or --org.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail
from hatp_mcp.cli.validate_cmd import parse_now
from hatp_mcp.core.model.example_plan import example_txn_id, org_trip_plan, trip_plan
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.org import load_agents, load_directory

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--now", metavar="ISO-8601", help="make the plan's times from this time (default: the real clock)")
    p.add_argument("--txn-id", metavar="ID", help="the plan's txnId (default: txn-trip-<the time, to the second>)")
    p.add_argument("--org", metavar="DIR", help="the organisation (made by hatp init-org) whose trip it is")
    p.add_argument("--agent", metavar="NAME", help="with --org: the agent (agent://ORG/NAME) that asks")


def run(args: argparse.Namespace) -> int:
    try:
        now = parse_now(args.now).replace(microsecond=0)
    except ValueError as exc:
        return fail(str(exc), EXIT_BAD_INPUT)
    txn_id = args.txn_id or example_txn_id(now)
    try:
        if args.org is None:
            plan = trip_plan(now, txn_id)
            said = "the trip of the TEST-ONLY organisation acme.com (spec/fixtures/org)"
        else:
            found = _asker(Path(args.org), args.agent)
            if isinstance(found, str):
                return fail(found, EXIT_PROBLEMS)
            principal, agent, traveller = found
            plan = org_trip_plan(now, txn_id, principal, agent, traveller)
            said = f"the trip of {principal} through {agent}, its inventory its own"
    except ValidationError as exc:
        return fail(f"--txn-id {args.txn_id!r}: {exc.errors(include_url=False)[0]['msg']}", EXIT_BAD_INPUT)
    except (OSError, ValueError, HatpError) as exc:
        return fail(f"--org {args.org}: {exc}", EXIT_BAD_INPUT)
    print(json.dumps(plan.wire(), indent=2, ensure_ascii=False))
    print(f"hatp example-plan: {said}", file=sys.stderr)
    return EXIT_OK


def _asker(org: Path, agent: str | None) -> tuple[str, str, str | None] | str:
    """(principal, agent, the principal's display name) from the organisation's Directory-signed agent cards, or
    why there is none to use. Raises OSError, ValueError or HatpError for an unreadable organisation."""
    agents, _ignored = load_agents(org)
    cards = sorted(agents.cards.values(), key=lambda c: c.id)
    if agent is not None:
        cards = [c for c in cards if c.id.rsplit("/", 1)[-1] == agent]
    if len(cards) != 1:
        names = ", ".join(sorted(agents.cards)) or "none"
        return (
            f"{org}: the example is asked through one agent of the organisation (agents: {names}); "
            "add one with hatp card agent, or choose with --agent NAME"
        )
    card = cards[0]
    person = load_directory(org)[0].card(card.acts_for)
    return card.acts_for, card.id, person.display_name if person is not None else None

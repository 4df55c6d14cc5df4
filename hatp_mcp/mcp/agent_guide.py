"""What a coordinator tells an agent about writing a plan: the Plan's JSON Schema for `begin_transaction.plan`, an
example plan made fresh at read time (resource `hatp://examples/trip-plan`) and a short prompt,
`plan_a_transaction`, on tiers, the one-final rule and fresh times; and `describe(fn)`, a tool's docstring as
the clean text its description is.

The schema is the generated one (spec/schemas/plan.schema.json, from the pydantic model) with its `$ref`s inlined,
since a tool's parameter must stand on its own and not every client resolves references. This module only
describes; it decides nothing and checks nothing (the validator does, at begin).
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from mcp.server import MCPServer

from hatp_mcp.core.model.example_plan import example_txn_id, org_trip_plan, trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.runtime.clock import Clock

__all__ = ["EXAMPLE_PLAN_URI", "PLAN_GUIDE", "PROMPT_NAME", "add_agent_guide", "describe", "plan_schema"]

EXAMPLE_PLAN_URI = "hatp://examples/trip-plan"
PROMPT_NAME = "plan_a_transaction"

PLAN_GUIDE = """\
A HATP plan makes several tool calls one all-or-nothing transaction. Each branch is one operation on one
participant, with an honest tier:
- hold: reserved at prepare, released on abort (seat, room, card authorization). Needs leaseSeconds.
- compensate: done at commit, undone on abort (calendar event). Needs compensation and undoWindowSeconds.
- final: irreversible (card capture). At most ONE final branch per plan; it commits last, after every
  compensate branch, and nothing can undo it.
Humans vote too: each approvals[] entry names a human:// address, the action and maxAmount (at least the plan's
total), never the requester's own principal.
Times are RFC 3339 UTC (2026-12-01T09:00:00Z) and must be in the future when you begin: createdAt now,
approvals[].decideBy before deadlines.decideBy before deadlines.commitBy, mandate.expiresAt after commitBy.
Amounts are decimal strings ("600.00"), never floats. Use a new txnId for every transaction.
Start from the resource hatp://examples/trip-plan (made fresh when read), call begin_transaction with the whole
plan, then transaction_status until it has an outcome. A refusal lists every problem with its rule, JSON path
and fix: correct those and begin again."""


def describe(fn: Callable[..., object]) -> str:
    """`fn`'s docstring as a tool description: no indentation, each paragraph (and each "- " item) one line."""
    text = inspect.cleandoc(fn.__doc__ or "")
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        items = re.split(r"\n(?=- )", block)
        paragraphs.append("\n".join(" ".join(line.strip() for line in item.splitlines()) for item in items))
    return "\n\n".join(paragraphs)


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return _inline(defs[ref.removeprefix("#/$defs/")], defs) | _inline(rest, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k != "$defs"}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


@cache
def _plan_schema() -> str:
    schema = Plan.model_json_schema(by_alias=True, mode="validation")
    return json.dumps(_inline(schema, schema.get("$defs", {})))


def plan_schema() -> dict[str, Any]:
    """The Plan's JSON Schema with every reference inlined (a fresh copy each call)."""
    return copy.deepcopy(json.loads(_plan_schema()))


def add_agent_guide(server: MCPServer, clock: Clock, requester: tuple[str, str] | None = None) -> None:
    """Offer the example plan resource (made from `clock` at each read) and the planning prompt on `server`.
    `requester` (principal, agent): the agent card the coordinator signs as; the example is then that
    organisation's trip (org_trip_plan), else the acme.com TEST organisation's."""
    where = f"asked by {requester[0]} through {requester[1]}" if requester else "in the acme.com TEST organisation"

    @server.resource(
        EXAMPLE_PLAN_URI,
        name="example-trip-plan",
        description=f"A valid trip plan {where} (seat and room holds, a calendar event, one final card capture, "
        "a finance approval), its times made from the coordinator's clock when read.",
        mime_type="application/json",
    )
    def example_plan() -> str:
        now = clock.now().replace(microsecond=0)
        if requester is not None:
            plan = org_trip_plan(now, example_txn_id(now), *requester)
        else:
            plan = trip_plan(now, example_txn_id(now))
        return json.dumps(plan.wire(), indent=2, ensure_ascii=False)

    @server.prompt(name=PROMPT_NAME, description="How to write a HATP plan: tiers, the one-final rule, fresh times.")
    def plan_a_transaction() -> str:
        return PLAN_GUIDE

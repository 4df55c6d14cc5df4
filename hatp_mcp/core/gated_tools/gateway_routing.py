"""The gateway's side of a gated tool call: route one call like a one-step plan to the required address, check
authority against the amount taken from the call's own arguments, and build the Approval (subject tool-call).
Pure: takes `now`, returns records; signing, nonces and persistence are the caller's (the gateway runtime).

The seam with the gateway core (hatp_mcp/core/gateway/machine.py): `open_tool_call_ask` builds the same AskRecord a plan
approval has, so `decide`, `decline`, `tick` and `withdraw` run on it unchanged; `build_tool_call_approval` wraps
`build_approval` and adds what a tool call needs (the ToolCall itself, and an expiry). This module must not
verify approvals (that is hatp_mcp/core/gated_tools/checks.py, the tool server's side).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.gated_tools.checks import GateRequirement, call_digest, expected_call
from hatp_mcp.core.gateway.ask_evidence import build_approval
from hatp_mcp.core.gateway.ask_ids import TOOL_CALL_PREFIX
from hatp_mcp.core.gateway.directory import Criteria, Directory
from hatp_mcp.core.gateway.machine import open_routed, route_seats
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Approval, Checked
from hatp_mcp.core.model.gateway import Ask, AskRecord
from hatp_mcp.core.model.toolcall import ToolCall
from hatp_mcp.errors import HatpError

__all__ = ["DEFAULT_TTL", "build_tool_call_approval", "open_tool_call_ask", "tool_call_ask_id"]

DEFAULT_TTL = timedelta(minutes=15)


def tool_call_ask_id(digest: str, round_: int = 1) -> str:
    """The id of the `round_`-th ask for the call with this call digest: ``toolcall.<24 hex>`` for the first,
    ``toolcall.<24 hex>.<n>`` after it (a closed ask is never reopened; an identical later call gets a new one,
    HATP-GATE-22)."""
    base = f"{TOOL_CALL_PREFIX}{digest[7:31]}"
    return base if round_ <= 1 else f"{base}.{round_}"


def open_tool_call_ask(
    *,
    server: str,
    tool: str,
    arguments: Mapping[str, Any],
    requirement: GateRequirement,
    tool_digest: str | None,
    requester: str,
    directory: Directory,
    gateway: str,
    now: datetime,
    call_digest_seen: str | None = None,
    decide_within: timedelta = timedelta(hours=1),
    round_: int = 1,
    open_asks: Mapping[str, int] | None = None,
) -> tuple[AskRecord, ToolCall]:
    """Route an approval of one call to `requirement.address`; returns the ask and the ToolCall it is about.

    The ToolCall is built here from the call's own arguments (`amountFrom`, `payeeFrom`), so authority is
    checked against the amount the tool will be called with, never a figure the agent wrote beside it.
    `call_digest_seen` is the digest the tool server gave the agent (APPROVAL_REQUIRED); when given it must
    match. `round_` numbers the asks for the same call (`tool_call_ask_id`). The requester is never eligible
    (separation of duties, as for plans). Raises HatpError HATP-ADDR-1..4 (address), HATP-GATE-20 (the
    arguments lack the amount or payee), HATP-GATE-7 (the arguments are not the ones the server described).
    """
    call = expected_call(server, tool, arguments, requirement, tool_digest)
    digest = call_digest(call)
    if call_digest_seen is not None and call_digest_seen != digest:
        raise HatpError(
            "HATP-GATE-7",
            f"these arguments digest to {digest}, not to the call digest the server gave ({call_digest_seen})",
            path="$.arguments",
            fix="ask for exactly the call the tool server refused",
            code="APPROVAL_INVALID",
        )
    amounts = [call.max_amount] if call.max_amount is not None else []
    up_to = {a.currency: a.decimal for a in amounts}
    decide_by = now + decide_within
    criteria = Criteria(
        action=requirement.action,
        up_to=up_to,
        requester=requester,
        decide_by=decide_by,
        open_asks=dict(open_asks or {}),  # HATP-GW-9: the gateway's live open asks per person
    )
    seats, quorum = route_seats(directory, requirement.address, criteria, now, "requires.address")
    ask = Ask(
        ask_id=tool_call_ask_id(digest, round_),
        kind="approve",
        requirement_id=tool if len(tool) <= 128 else tool[:128],
        plan_digest=digest,
        address=requirement.address,
        requester=requester,
        decide_by=format_ts(decide_by),
        gateway=gateway,
        issued_at=format_ts(now),
    )
    checked = Checked(status="checked", action=requirement.action, amounts=amounts)
    rec = open_routed(ask, seats, quorum, checked, now, directory.names())
    return rec.model_copy(update={"plan_totals": amounts, "up_to": amounts}), call


def build_tool_call_approval(
    rec: AskRecord, call: ToolCall, *, gateway: str, nonce: str, now: datetime, ttl: timedelta = DEFAULT_TTL
) -> Approval | None:
    """The unsigned Approval (subject tool-call) once the humans decided; None while pending. It expires `ttl`
    after `now`, never later than the ask's own deadline. Raises ValueError when `call` is not the one asked."""
    if rec.ask.plan_digest != call_digest(call):
        raise ValueError("the ToolCall is not the one this ask routed")
    base = build_approval(rec, gateway, nonce, now)
    if base is None:
        return None
    expires = min(now + ttl, parse_ts(rec.ask.decide_by))
    update = {"subject": "tool-call", "tool_call": call, "expires_at": format_ts(expires), "request": rec.agent_request}
    return base.model_copy(update=update)

"""The gateway's side of a gated tool call: route one call like a one-step plan to the required address, check
authority against the amount taken from the call's own arguments, and build the Approval (subject tool-call).
Pure: takes `now`, returns records; signing, nonces and persistence are the caller's (the gateway runtime).

The seam with the gateway core (hatp_mcp/core/gateway.py): `open_tool_call_ask` builds the same AskRecord a plan
approval has, so `decide`, `decline`, `tick` and `withdraw` run on it unchanged; `build_tool_call_approval` wraps
`build_approval` and adds what a tool call needs (the ToolCall itself, and an expiry). This module must not
verify approvals (that is hatp_mcp/core/gate.py, the tool server's side).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hatp_mcp.core.directory import Criteria, Directory
from hatp_mcp.core.gate import GateRequirement, call_digest
from hatp_mcp.core.gateway import open_routed, route_seats
from hatp_mcp.core.gateway_evidence import build_approval
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Approval, Checked
from hatp_mcp.core.model.gateway import Ask, AskRecord
from hatp_mcp.core.model.toolcall import ToolCall
from hatp_mcp.errors import HatpError

__all__ = ["DEFAULT_TTL", "build_tool_call_approval", "open_tool_call_ask"]

DEFAULT_TTL = timedelta(minutes=15)


def open_tool_call_ask(
    call: ToolCall,
    requirement: GateRequirement,
    *,
    requester: str,
    directory: Directory,
    gateway: str,
    now: datetime,
    decide_within: timedelta = timedelta(hours=1),
) -> AskRecord:
    """Route an approval of `call` to `requirement.address`.

    Authority is checked against `call.maxAmount`, which the tool server's gate took from the call's arguments
    (``amountFrom``); when the requirement names no amount the check covers the action alone. The requester is
    never eligible (separation of duties, as for plans). Raises HatpError HATP-ADDR-1..4 (address) and
    HATP-GATE-1 when the ToolCall is inconsistent with the requirement (an amountFrom without an amount).
    """
    if requirement.amount_from is not None and call.max_amount is None:
        raise HatpError(
            "HATP-GATE-1",
            f"tool {call.tool!r} requires an amount (amountFrom {requirement.amount_from}) but the call names none",
            path="$.toolCall.maxAmount",
            fix="send the ToolCall exactly as the tool server's APPROVAL_REQUIRED error gave it",
            code="APPROVAL_REQUIRED",
        )
    amounts = [call.max_amount] if call.max_amount is not None else []
    up_to = {a.currency: a.decimal for a in amounts}
    decide_by = now + decide_within
    criteria = Criteria(action=requirement.action, up_to=up_to, requester=requester, decide_by=decide_by)
    seats, quorum = route_seats(directory, requirement.address, criteria, now, "requires.address")
    digest = call_digest(call)
    ask = Ask(
        ask_id=f"toolcall.{digest[7:31]}",
        kind="approve",
        requirement_id=call.tool if len(call.tool) <= 128 else call.tool[:128],
        plan_digest=digest,
        address=requirement.address,
        requester=requester,
        decide_by=format_ts(decide_by),
        gateway=gateway,
        issued_at=format_ts(now),
    )
    checked = Checked(status="checked", action=requirement.action, amounts=amounts)
    rec = open_routed(ask, seats, quorum, checked, now)
    return rec.model_copy(update={"plan_totals": amounts, "up_to": amounts})


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
    return base.model_copy(update={"subject": "tool-call", "tool_call": call, "expires_at": format_ts(expires)})

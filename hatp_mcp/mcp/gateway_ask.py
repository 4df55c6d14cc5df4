"""Asking the Human Gateway to approve exactly one tool call, and waiting for the people: the one ask-and-poll
that the proxy's gate (hatp_mcp/mcp/proxy_gate.py) and the journal's gated undos
(hatp_mcp/mcp/journal_undo_approvals.py) share.

`ask_and_wait` signs an AgentRequest over the call digest with the agent's key (its Directory-signed card names
whom it acts for, spec/gateway.md HATP-GW-47), sends `request_approval`, then polls `approval_status` on the
Clock until the ask is decided, ends, or the wait's absolute deadline (also capped by the ask's own `decideBy`)
passes. It returns the signed Approval, or an `AskEnded` saying why there is none: each caller turns that into
its own refusal. Every gateway answer is checked strictly: a refusal, a text that is not JSON, or an answer that
is not an object ends the ask (`GATEWAY_REFUSED`), a gateway that does not answer ends it `GATEWAY_UNREACHABLE`.
This module decides nothing about the approval itself: the tool server's gate checks it.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hatp_mcp.core.gateway.agents import sign_request
from hatp_mcp.core.model.agent import AgentCard
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.mcp.server_links import Link
from hatp_mcp.runtime.clock import Clock

__all__ = ["ENDED_STATES", "AskEnded", "Asker", "Progress", "ask_and_wait"]

ENDED_STATES = ("rejected", "expired", "exhausted", "withdrawn")

# What the asker says while it waits: after the ask is made (its id and status) and after each look.
Progress = Callable[[str, Mapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class AskEnded:
    """Why no approval came. `code`: APPROVAL_REJECTED (with `rejecters`), APPROVAL_<STATE> for an ask that
    ended otherwise, APPROVAL_TIMEOUT (no decision by the deadline, `waited` seconds), GATEWAY_REFUSED,
    GATEWAY_UNREACHABLE;
    `ask_id` is None when the gateway never took the ask."""

    code: str
    reason: str
    ask_id: str | None = None
    state: str | None = None
    rejecters: str = ""
    waited: float = 0.0  # seconds, for APPROVAL_TIMEOUT


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks and how long it waits: the gateway's link, the agent's key and the card listing it, the clock,
    the longest wait and how often it looks."""

    gateway: Link
    key: SigningKey
    card: AgentCard
    clock: Clock
    wait: timedelta
    poll: timedelta


class _Ended(Exception):
    def __init__(self, ended: AskEnded) -> None:
        super().__init__(ended.reason)
        self.ended = ended


async def ask_and_wait(
    asker: Asker,
    call: Mapping[str, Any],
    call_digest: str,
    progress: Progress | None = None,
) -> dict[str, Any] | AskEnded:
    """Ask the gateway to approve `call` (request_approval's arguments but `request` and `call_digest`, which
    this adds) and wait: the signed Approval, or why none came. Never raises for what the gateway or the people
    do; `progress` is awaited after the ask and after each look."""
    clock = asker.clock
    now = clock.now()
    deadline = now + asker.wait
    request = sign_request(
        asker.key,
        asker.card.id,
        asker.card.acts_for,
        "tool-call",
        call_digest,
        now,
        nonce=secrets.token_urlsafe(18),
    )
    try:
        status = await _call(
            asker.gateway, "request_approval", {**call, "request": request.wire(), "call_digest": call_digest}
        )
        ask_id = str(status.get("askId"))
        decide_by = status.get("decideBy")
        if isinstance(decide_by, str):
            deadline = min(deadline, parse_ts(decide_by))
        if progress is not None:
            await progress(ask_id, status)
        while True:
            state = status.get("state")
            if state == "approved" and isinstance(status.get("approval"), dict):
                approval: dict[str, Any] = status["approval"]
                return approval
            if state == "rejected":
                who = _rejecters(status)
                return AskEnded("APPROVAL_REJECTED", f"rejected by {who}", ask_id, "rejected", who)
            if state in ENDED_STATES or state not in ("pending", "approved"):
                return AskEnded(f"APPROVAL_{str(state).upper()}", f"the ask ended {state}", ask_id, str(state))
            if clock.now() >= deadline:
                waited = (deadline - now).total_seconds()
                return AskEnded("APPROVAL_TIMEOUT", f"no decision within {waited:g}s", ask_id, "pending", waited=waited)
            await clock.sleep_until(min(deadline, clock.now() + asker.poll))
            status = await _call(asker.gateway, "approval_status", {"ask_id": ask_id})
            if progress is not None:
                await progress(ask_id, status)
    except _Ended as exc:
        return exc.ended


async def _call(gateway: Link, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The gateway tool's answer as an object. Raises _Ended: unreachable, refused, or not a JSON object."""
    client = await gateway.client()
    try:
        raw = await client.call_tool(tool, args)
    except Exception as exc:  # the link is dropped, so the next ask reconnects
        gateway.lost(client)
        raise _Ended(
            AskEnded("GATEWAY_UNREACHABLE", f"the gateway did not answer {tool} ({type(exc).__name__})")
        ) from exc
    text = " ".join(getattr(c, "text", "") for c in raw.content)
    if raw.is_error:
        raise _Ended(AskEnded("GATEWAY_REFUSED", f"the gateway refused {tool}: {text}"))
    try:
        data = raw.structured_content if raw.structured_content is not None else json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise _Ended(AskEnded("GATEWAY_REFUSED", f"the gateway's {tool} answered no object: {text[:200]}"))
    return data


def _rejecters(status: Mapping[str, Any]) -> str:
    """Who rejected: as the gateway names them (HATP-GW-93: display name, address beside it), else the addresses
    its signed Approval lists."""
    named = status.get("rejectedBy")
    if isinstance(named, list) and named and all(isinstance(n, str) for n in named):
        return ", ".join(named)
    approval = status.get("approval") or {}
    who = [d.get("approver") for d in approval.get("decisions") or [] if d.get("decision") == "reject"]
    return ", ".join(str(w) for w in who) or "the people asked"

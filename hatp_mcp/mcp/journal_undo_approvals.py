"""Approval-gated undos (HATP-JRN-15): when the tool an undo calls is gated (`gate_tools`, spec/gated-tools.md)
and answers APPROVAL_REQUIRED, the journal asks the Human Gateway to approve exactly that call and waits.

`UndoApprovals.approve(refusal, tool, arguments)` first checks that the refusal describes the call the journal is
about to make (the same tool, the digest of exactly the registered arguments), then sends the gateway's
`request_approval` the server id, tool, arguments and requirement the tool server named, and waits for the people
through the ask-and-poll the proxy's gate uses too (hatp_mcp/mcp/gateway_ask.py: an AgentRequest signed by the
journal's agent key, `approval_status` polled on the journal's Clock until the ask is decided, it ends, or the
wait's absolute deadline passes). It returns the signed Approval for the caller to send in the
call's `_meta`; everything else raises `UndoRefused` with the reason, so the step ends ROLLBACK_FAILED with that
reason in its `undo.gave-up` entry and its dead letter, never retried and never run without an approval. This
module decides nothing about the approval itself: the tool server's gate checks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hatp_mcp.core.model.agent import AgentCard
from hatp_mcp.core.signing.canonical import CanonicalError, digest
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.mcp.gateway_ask import AskEnded, Asker, ask_and_wait
from hatp_mcp.mcp.server_links import Link
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.journal.undoable import UndoRefused

__all__ = ["APPROVAL_INVALID_CODE", "APPROVAL_REQUIRED_CODE", "UndoApprovals", "not_this_call"]

APPROVAL_REQUIRED_CODE = -32050  # hatp_mcp/mcp/errors.py: the gated tool names what to have approved
APPROVAL_INVALID_CODE = -32065  # an approval was given and the gate refused it


def not_this_call(need: Mapping[str, Any], tool: str, arguments: Mapping[str, Any]) -> str | None:
    """Why an APPROVAL_REQUIRED refusal's `data` does not describe calling `tool` with exactly `arguments` (None
    when it does): an approval for anything else must not be asked for in the undo's name."""
    tc = need.get("toolCall")
    if not isinstance(tc, Mapping) or not isinstance(need.get("callDigest"), str):
        return "the tool server's APPROVAL_REQUIRED names no toolCall and callDigest"
    if tc.get("tool") != tool:
        return f"the tool server asks approval for tool {tc.get('tool')!r}, not the undo's {tool!r}"
    try:
        mine = digest(dict(arguments))
    except CanonicalError as exc:  # registered arguments are canonical (HATP-JRN-11); this is a guard
        return f"the undo's arguments have no digest: {exc}"
    if tc.get("argumentsDigest") != mine:
        return f"the tool server asks approval for arguments digesting to {tc.get('argumentsDigest')}, not {mine}"
    if not isinstance(tc.get("server"), str) or not isinstance(need.get("address"), str):
        return "the tool server's APPROVAL_REQUIRED names no server id or address"
    return None


@dataclass
class UndoApprovals:
    """How the journal has a gated undo approved. `gateway`: the Human Gateway's MCP link; `key` and `card`: the
    journal's agent key and the Directory-signed agent card listing it; `wait`: the longest it waits for the
    people (also capped by the ask's own `decideBy`); `poll`: how often it asks where the ask stands."""

    gateway: Link
    key: SigningKey
    card: AgentCard
    clock: Clock
    wait: timedelta = timedelta(minutes=15)
    poll: timedelta = timedelta(seconds=2)

    async def approve(self, need: Mapping[str, Any], tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The signed Approval for exactly this call. Raises UndoRefused (with the reason: not this call, the
        gateway refused the request, the people rejected it, the ask ended, no decision before the deadline)."""
        wrong = not_this_call(need, tool, arguments)
        if wrong is not None:
            raise UndoRefused(f"HATP-JRN-15: {wrong}; nothing was asked")
        tc = need["toolCall"]
        call = {
            "server_id": tc["server"],
            "tool": tool,
            "arguments": dict(arguments),
            "requires": {"address": need["address"], "requirement": need.get("requirement") or {}},
            "tool_digest": tc.get("toolDigest"),
        }
        asker = Asker(self.gateway, self.key, self.card, self.clock, self.wait, self.poll)
        got = await ask_and_wait(asker, call, str(need["callDigest"]))
        if not isinstance(got, AskEnded):
            return got
        if got.code == "GATEWAY_UNREACHABLE":  # this attempt fails; a retry asks again
            raise RuntimeError(got.reason)
        if got.ask_id is None:
            raise UndoRefused(f"HATP-JRN-15: the gateway did not route the undo's approval: {got.reason}")
        if got.code == "APPROVAL_TIMEOUT":
            raise UndoRefused(
                f"HATP-JRN-15: no decision on the undo's approval (ask {got.ask_id}) within {got.waited:g}s"
            )
        by = f" ({got.reason})" if got.rejecters else ""
        raise UndoRefused(f"HATP-JRN-15: the approval of the undo (ask {got.ask_id}) ended {got.state}{by}")

"""Ask ids: three namespaces no caller can cross (spec/gateway.md HATP-ASK-7). Pure.

A gateway keeps every ask under one id, and an id already taken is answered as the ask it names. So the ids of
the three kinds must never meet, or one kind squats another: a question opened under `{txnId}/{requirementId}`
would stand where that transaction's approval is routed later.

- a plan's approval: ``{txnId}/{requirementId}``, the only kind with a ``/``;
- a tool call's approval: ``toolcall.<24 hex>`` or ``toolcall.<24 hex>.<n>``, made by the gateway;
- a question: the agent's own id, without ``/`` and not beginning with ``toolcall.``.
"""

from __future__ import annotations

from hatp_mcp.errors import HatpError

__all__ = ["TOOL_CALL_PREFIX", "approval_ask_id", "check_question_id"]

TOOL_CALL_PREFIX = "toolcall."


def approval_ask_id(txn_id: str, requirement_id: str) -> str:
    """The id of the ask for one approval requirement of a plan."""
    return f"{txn_id}/{requirement_id}"


def check_question_id(ask_id: str) -> None:
    """HATP-ASK-7: a question's id stays out of the approvals' namespaces.

    Raises HatpError HATP-ASK-7 (code ASK_ID_RESERVED) for an id with ``/`` or one beginning with ``toolcall.``.
    """
    if "/" in ask_id or ask_id.startswith(TOOL_CALL_PREFIX):
        raise HatpError(
            "HATP-ASK-7",
            f"ask id {ask_id!r} is in a namespace the gateway keeps for approvals",
            path="$.askId",
            code="ASK_ID_RESERVED",
            fix="name the question without '/' and not beginning with 'toolcall.', e.g. 'q-hotel-choice'",
        )

"""The journal asks the gateway only for the call it is about to make (HATP-JRN-15): a tool server's
APPROVAL_REQUIRED that names another tool, other arguments or no call is refused before anything is asked."""

from __future__ import annotations

from typing import Any, cast

import pytest

from hatp_mcp.core.model.agent import AgentCard
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.mcp.journal_undo_approvals import UndoApprovals, not_this_call
from hatp_mcp.mcp.server_links import Link
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.undoable import UndoRefused
from tests.acme_org import agent_doc, agent_key

ARGS = {"item": "882"}


def need(tool: str = "reverse_refund", args: dict[str, Any] = ARGS) -> dict[str, Any]:
    call = {"server": "mcp://shop.example", "tool": tool, "argumentsDigest": digest(args)}
    return {"address": "human://acme.com/role/finance-approver", "toolCall": call, "callDigest": digest(call)}


class NoGateway:
    async def client(self) -> Any:
        raise AssertionError("the gateway was asked")

    def lost(self, client: Any) -> None:
        raise AssertionError("the gateway was asked")


def test_the_refusal_for_exactly_the_undo_describes_it() -> None:
    assert not_this_call(need(), "reverse_refund", ARGS) is None


@pytest.mark.parametrize(
    ("refusal", "why"),
    [
        (need(tool="refund"), "asks approval for tool 'refund'"),
        (need(args={"item": "999"}), "asks approval for arguments digesting to"),
        ({"address": "human://acme.com/role/finance-approver"}, "names no toolCall"),
        ({**need(), "toolCall": {**need()["toolCall"], "server": None}}, "names no server id"),
    ],
)
@pytest.mark.anyio
async def test_an_approval_for_another_call_is_never_asked_for_in_the_undos_name_HATP_JRN_15(
    refusal: dict[str, Any], why: str
) -> None:
    assert why in (not_this_call(refusal, "reverse_refund", ARGS) or "")
    card = AgentCard.model_validate(agent_doc())
    approvals = UndoApprovals(cast(Link, NoGateway()), agent_key(), card, FakeClock())
    with pytest.raises(UndoRefused) as refused:
        await approvals.approve(refusal, "reverse_refund", ARGS)
    assert str(refused.value).startswith("HATP-JRN-15: ") and why in str(refused.value)
    assert str(refused.value).endswith("nothing was asked")

"""A coordinator's Approver that remembers, per open ask, who the gateway says it waits for (HATP-MCP-54).

`WaitingNotes(inner)` delegates every call to `inner` and keeps the latest `waiting` of each pending answer (the
people asked, by display name and roles, and the ask's inbox link), so `hatp/txn/status` can tell an agent who
must act and where while a transaction is approving. The notes are words for people, never evidence: the signed
pending vote in the record stays what counts, and its `decideBy` is the deadline the status gives. They live in
memory only; after a restart the next poll of the ask writes them again.
"""

from __future__ import annotations

from typing import Any

from hatp_mcp.core.model.estimate import Estimate
from hatp_mcp.core.model.gateway_messages import AskWaiting
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.runtime.interfaces import Approver, ApproverAnswer

__all__ = ["WaitingNotes"]


class WaitingNotes:
    def __init__(self, inner: Approver) -> None:
        self.inner = inner
        self._notes: dict[tuple[str, str], AskWaiting] = {}

    def waiting(self, txn_id: str) -> dict[str, AskWaiting]:
        """The latest waiting words of each of `txn_id`'s open asks, by requirement id."""
        return {rid: w for (txn, rid), w in self._notes.items() if txn == txn_id}

    def _noted(self, txn_id: str, requirement_id: str, answer: ApproverAnswer) -> ApproverAnswer:
        if answer.vote.get("decision") == "pending" and answer.waiting is not None:
            self._notes[(txn_id, requirement_id)] = answer.waiting
        else:
            self._notes.pop((txn_id, requirement_id), None)
        return answer

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        return self._noted(plan.txn_id, requirement_id, await self.inner.ask(plan, requirement_id, terms))

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer:
        return self._noted(txn_id, requirement_id, await self.inner.poll(txn_id, requirement_id))

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        return self._noted(txn_id, requirement_id, await self.inner.tighten(txn_id, requirement_id, terms))

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        self._notes.pop((txn_id, requirement_id), None)
        await self.inner.withdraw(txn_id, requirement_id)

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        return await self.inner.estimate(plan, requirement_id)

    def __getattr__(self, name: str) -> Any:
        """`wait` (the long poll) as the inner approver has it, or not at all: the driver long-polls only an
        approver that can (HATP-MCP-40)."""
        attr = getattr(self.inner, name)
        if name != "wait":
            return attr

        async def wait(txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
            return self._noted(txn_id, requirement_id, await attr(txn_id, requirement_id, seconds))

        return wait

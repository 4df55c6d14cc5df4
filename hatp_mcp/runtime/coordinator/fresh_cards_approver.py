"""A coordinator's Approver whose answers are handed on only after the organisation's cards were looked at again
(spec/gateway.md HATP-GW-82): a passkey the operator put on a card a moment ago counts in the coordinator's own
check of the approval (HATP-TXN-19), not only from its next start.

`FreshCardsApprover(inner, refresh)` delegates every call to `inner` and, before returning an answer that may
carry an Approval (ask, poll, wait, tighten), calls `refresh` (runtime/card_watch.py CardWatch.refresh, which
reloads and re-verifies the cards when their files changed and updates the coordinator's HumanKeys in place).
It adds no protocol logic and changes no answer.
"""

from __future__ import annotations

from collections.abc import Callable

from hatp_mcp.core.model.estimate import Estimate
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.runtime.interfaces import ApproverAnswer, WatchingApprover

__all__ = ["FreshCardsApprover"]


class FreshCardsApprover:
    def __init__(self, inner: WatchingApprover, refresh: Callable[[], object]) -> None:
        self.inner = inner
        self.refresh = refresh

    def _fresh(self, answer: ApproverAnswer) -> ApproverAnswer:
        self.refresh()
        return answer

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        return self._fresh(await self.inner.ask(plan, requirement_id, terms))

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer:
        return self._fresh(await self.inner.poll(txn_id, requirement_id))

    async def wait(self, txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
        return self._fresh(await self.inner.wait(txn_id, requirement_id, seconds))

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        return self._fresh(await self.inner.tighten(txn_id, requirement_id, terms))

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        await self.inner.withdraw(txn_id, requirement_id)

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        return await self.inner.estimate(plan, requirement_id)

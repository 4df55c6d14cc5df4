"""An in-memory Approver with a scripted human, for coordinator tests and the in-process demo.

It signs votes and approvals with a gateway-role key, exactly as the Human Gateway would, and decides as its
script says: approve or reject, after some seconds on the (fake) clock. It does no routing, authority or
directory work (that is the gateway's, hatp_mcp/runtime/gateway/driver.py); it must not be used in production.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.estimate import Estimate, EstimateStep
from hatp_mcp.core.model.evidence import Approval, Checked, HumanDecision, Quorum, RoutedHuman, RoutingRecord, Vote
from hatp_mcp.core.model.money import plan_money
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.interfaces import ApproverAnswer

__all__ = ["SCRIPTED_GATEWAY", "HumanScript", "ScriptedApprover"]

SCRIPTED_GATEWAY = "gateway://acme.com"  # the id a scripted gateway votes as (bind its key to it, HATP-SIG-6)


@dataclass(frozen=True)
class HumanScript:
    """What the scripted human does: `decision` after `after_seconds`; until then the vote is pending."""

    decision: str = "approve"  # approve | reject | never
    after_seconds: float = 0.0
    approvers: tuple[str, ...] = ("human://acme.com/alice",)
    quorum: int = 1
    checked: str = "checked"  # what the routing record says the authority check did
    decide_seconds: int = 3600  # the signed deadline of a pending vote, counted from the ask
    worst_seconds: int | None = None  # what `estimate` says (default: decide_seconds)


@dataclass
class _Ask:
    plan: Plan
    plan_digest: str
    asked_at: datetime
    answer: ApproverAnswer | None = None
    withdrawn: bool = False
    terms: ApprovalTerms | None = None


@dataclass
class ScriptedApprover:
    key: SigningKey
    clock: Clock
    gateway: str = SCRIPTED_GATEWAY
    scripts: dict[str, HumanScript] = field(default_factory=dict)
    asks: dict[tuple[str, str], _Ask] = field(default_factory=dict)
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (method, txnId, requirementId)
    tightened: list[tuple[str, str, ApprovalTerms]] = field(default_factory=list)
    _digests: dict[str, str] = field(default_factory=dict)  # txnId -> plan digest, computed once per plan

    def _digest(self, plan: Plan) -> str:
        got = self._digests.get(plan.txn_id)
        if got is None:
            got = self._digests[plan.txn_id] = plan.digest()
        return got

    def script(self, requirement_id: str) -> HumanScript:
        return self.scripts.get(requirement_id, HumanScript())

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        self.calls.append(("ask", plan.txn_id, requirement_id))
        entry = self.asks.get((plan.txn_id, requirement_id))
        if entry is None:
            entry = self.asks[(plan.txn_id, requirement_id)] = _Ask(plan, self._digest(plan), self.clock.now())
            self._digests.pop(plan.txn_id, None)
        if terms is not None:
            return await self.tighten(plan.txn_id, requirement_id, terms)
        return self._answer(entry, requirement_id)

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer:
        self.calls.append(("poll", txn_id, requirement_id))
        return self._answer(self.asks[(txn_id, requirement_id)], requirement_id)

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        self.calls.append(("withdraw", txn_id, requirement_id))
        entry = self.asks.get((txn_id, requirement_id))
        if entry is not None:
            entry.withdrawn = True

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        """The script's worst case (`worst_seconds`, else `decide_seconds`), signed like the gateway's."""
        self.calls.append(("estimate", plan.txn_id, requirement_id))
        script = self.script(requirement_id)
        now = self.clock.now()
        worst = script.worst_seconds if script.worst_seconds is not None else script.decide_seconds
        est = Estimate(
            txn_id=plan.txn_id,
            requirement_id=requirement_id,
            plan_digest=self._digest(plan),
            gateway=self.gateway,
            worst_seconds=worst,
            order=[EstimateStep(human=h, asked_after_seconds=0, due_after_seconds=worst) for h in script.approvers],
            decide_by=format_ts(now + timedelta(seconds=script.decide_seconds)),
            issued_at=format_ts(now),
        )
        return Estimate.model_validate(sign_object(est.wire(), self.key))

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        """Keep `terms` for the ask (its pending vote's deadline, the approval's terms); never a later deadline."""
        self.calls.append(("tighten", txn_id, requirement_id))
        entry = self.asks[(txn_id, requirement_id)]
        if parse_ts(terms.decide_by) > self._deadline(entry, requirement_id):
            raise HatpError(
                "HATP-GW-30", "tighten never extends the deadline", path="$.decideBy", code="DEADLINE_EXTENDED"
            )
        if entry.answer is None:
            entry.terms = terms
            self.tightened.append((txn_id, requirement_id, terms))
        return self._answer(entry, requirement_id)

    def _deadline(self, entry: _Ask, rid: str) -> datetime:
        if entry.terms is not None:
            return parse_ts(entry.terms.decide_by)
        return entry.asked_at + timedelta(seconds=self.script(rid).decide_seconds)

    def _answer(self, entry: _Ask, rid: str) -> ApproverAnswer:
        if entry.answer is not None:
            return entry.answer  # idempotent: a decided ask answers the same signed objects
        script = self.script(rid)
        now = self.clock.now()
        decided = script.decision != "never" and now >= entry.asked_at + timedelta(seconds=script.after_seconds)
        if not decided:
            deadline = format_ts(self._deadline(entry, rid))
            return ApproverAnswer(vote=self._vote(entry, rid, "pending", deadline), approval=None)
        approval = self._approval(entry, rid, script)
        decision = "yes" if script.decision == "approve" else "no"
        entry.answer = ApproverAnswer(vote=self._vote(entry, rid, decision, None), approval=approval)
        return entry.answer

    def _vote(self, entry: _Ask, rid: str, decision: str, decide_by: str | None) -> dict[str, Any]:
        vote = Vote(
            txn_id=entry.plan.txn_id,
            branch_id=rid,
            plan_digest=entry.plan_digest,
            voter=self.gateway,
            decision=decision,  # type: ignore[arg-type]
            decide_by=decide_by,
            issued_at=format_ts(self.clock.now()),
        )
        return sign_object(vote.wire(), self.key)

    def _approval(self, entry: _Ask, rid: str, script: HumanScript) -> dict[str, Any]:
        plan = entry.plan
        req = next(r for r in plan.approvals if r.id == rid)
        now = format_ts(self.clock.now())
        plan_totals, up_to = plan_money(plan).amounts()
        decision: Literal["approve", "reject"] = "approve" if script.decision == "approve" else "reject"
        routing = RoutingRecord(
            address=req.address,
            plan_digest=entry.plan_digest,
            requester=plan.requester.principal,
            plan_totals=plan_totals,
            up_to=up_to,
            checked=Checked(status=script.checked, action=req.action, amounts=up_to),  # type: ignore[arg-type]
            humans=[RoutedHuman(human=h, status="decided") for h in script.approvers],
        )
        approval = Approval(
            approval_id=f"apr-{secrets.token_hex(8)}",
            subject="plan",
            txn_id=plan.txn_id,
            requirement_id=rid,
            plan_digest=entry.plan_digest,
            decision=decision,
            decisions=[HumanDecision(approver=h, decision=decision, decided_at=now) for h in script.approvers],
            quorum=Quorum(required=script.quorum, of=max(script.quorum, len(script.approvers))),
            routing=routing,
            gateway=self.gateway,
            nonce=secrets.token_hex(16),
            issued_at=now,
            terms=entry.terms,
        )
        return sign_object(approval.wire(), self.key)

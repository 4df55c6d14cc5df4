"""The coordinator's fencing-token locks (spec/coordinator.md HATP-LOCK-7..9): the caller of hatp/lock/*.

A branch whose plan names `locks` (the resources it writes) has each locked at its participant, for its
transaction, before the branch is prepared; the commit carries the tokens the participant granted, and the
participant refuses a write whose token is no longer the live one (HATP-LOCK-6). The locks are given back once the
branch has its commit or abort answer. A participant that serves no locks cannot run such a branch: the prepare
fails before it is sent (fail closed).

Tokens are kept in memory only: a replacement coordinator takes the locks again at commit (the lock's owner is the
transaction, HATP-LOCK-5, so while its lease runs or after it ended unclaimed the same transaction gets a new,
larger token; once another transaction holds it, LOCKED). This module must not know about transports: it calls a
participant through hatp_mcp.runtime.interfaces.ParticipantLocks.
"""

from __future__ import annotations

import math
from datetime import datetime

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.messages import LockAcquireRequest, LockReleaseRequest
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.interfaces import Participant, ParticipantLocks

__all__ = ["DEFAULT_LOCK_SECONDS", "PlanLocks", "lock_lease_seconds"]

DEFAULT_LOCK_SECONDS = 900  # a plan that names no commitBy: as long as a participant's default longest hold


def lock_lease_seconds(plan: Plan, now: datetime, default: int = DEFAULT_LOCK_SECONDS) -> int:
    """HATP-LOCK-7: how long a lock is asked for: until the plan's `deadlines.commitBy` (no write of the
    transaction comes later), else `default`; at least one second."""
    if plan.deadlines.commit_by is None:
        return default
    return max(1, math.ceil((parse_ts(plan.deadlines.commit_by) - now).total_seconds()))


class PlanLocks:
    """The locks this coordinator holds, per (txnId, branchId): resource -> fencing token."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], dict[str, int]] = {}

    @staticmethod
    def _served(participant: Participant, plan: Plan, branch: Branch) -> ParticipantLocks:
        if not isinstance(participant, ParticipantLocks):
            index = plan.branches.index(branch)
            raise HatpError(
                "HATP-LOCK-7",
                f"branch {branch.branch_id} names locks, and {branch.participant} serves none",
                path=f"$.branches[{index}].locks",
                code="UNSUPPORTED",
                fix="leave `locks` out of a branch whose participant serves no hatp/lock/* (--serve-locks)",
            )
        return participant

    async def take(self, participant: Participant, plan: Plan, plan_digest: str, branch: Branch, now: datetime) -> None:
        """HATP-LOCK-7: lock every resource `branch` names, in order, for its transaction (a lock already held
        for it is kept). Raises HatpError: HATP-LOCK-7 (the participant serves no locks), what the participant
        refused (HATP-LOCK-1 LOCKED, a HATP-TRUST rule), or a transport failure; the locks taken so far stay
        held and are given back with the abort that follows."""
        if not branch.locks:
            return
        locks = self._served(participant, plan, branch)
        held = self._held.setdefault((plan.txn_id, branch.branch_id), {})
        lease = lock_lease_seconds(plan, now)
        for resource in sorted(set(branch.locks)):
            if resource in held:
                continue
            granted = await locks.acquire_lock(
                LockAcquireRequest(
                    resource=resource,
                    owner=plan.txn_id,
                    lease_seconds=lease,
                    txn_id=plan.txn_id,
                    branch_id=branch.branch_id,
                    plan_digest=plan_digest,
                )
            )
            held[resource] = granted.token

    async def tokens(
        self, participant: Participant, plan: Plan, plan_digest: str, branch: Branch, now: datetime
    ) -> dict[str, int] | None:
        """HATP-LOCK-8: the tokens a commit of `branch` carries, None when it names no locks. A coordinator that
        holds none for it (a replacement) takes them first. Raises as `take`."""
        if not branch.locks:
            return None
        await self.take(participant, plan, plan_digest, branch, now)
        return dict(self._held[(plan.txn_id, branch.branch_id)])

    async def give_back(self, participant: Participant, txn_id: str, branch_id: str, plan_digest: str) -> None:
        """HATP-LOCK-9: once the branch has its commit or abort answer, release what it holds. A release the
        participant refuses (the lease already ended) or cannot hear is left to the lease: it changes no
        answer."""
        held = self._held.pop((txn_id, branch_id), None)
        if not held or not isinstance(participant, ParticipantLocks):
            return
        for resource, token in sorted(held.items()):
            req = LockReleaseRequest(
                resource=resource, token=token, txn_id=txn_id, branch_id=branch_id, plan_digest=plan_digest
            )
            try:
                await participant.release_lock(req)
            except HatpError:  # stale or unreachable: the lock ends with its lease (HATP-LOCK-3)
                continue

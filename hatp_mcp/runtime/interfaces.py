"""What the coordinator runtime calls: a Participant (per server) and an Approver (the Human Gateway).

Both are transport-free, message-based Protocols: the MCP binding implements Participant over a client session,
the gateway implements Approver, and tests wire in-memory objects. This module defines shapes only; it must not
import a transport or do IO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from hatp_mcp.core.model.estimate import Estimate
from hatp_mcp.core.model.gateway_messages import AskWaiting
from hatp_mcp.core.model.messages import (
    AbortRequest,
    BranchResult,
    CommitRequest,
    CompensateRequest,
    LockAcquireRequest,
    LockReleaseRequest,
    LockResult,
    PrepareRequest,
    PrepareResult,
    RenewRequest,
    StatusRequest,
    StatusResult,
)
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms

__all__ = ["Approver", "ApproverAnswer", "Participant", "ParticipantLocks", "WatchingApprover"]


class Participant(Protocol):
    """One MCP server taking part in transactions. Every call is idempotent on (txnId, branchId)."""

    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        """Prepare (or, with `quoteOnly`, quote) one branch: a signed vote and a signed receipt."""
        ...

    async def commit(self, req: CommitRequest) -> BranchResult: ...

    async def abort(self, req: AbortRequest) -> BranchResult: ...

    async def compensate(self, req: CompensateRequest) -> BranchResult: ...

    async def renew(self, req: RenewRequest) -> BranchResult: ...

    async def status(self, req: StatusRequest) -> StatusResult: ...


@runtime_checkable
class ParticipantLocks(Protocol):
    """A participant that serves fencing-token locks (hatp/lock/*), as the coordinator asks for them
    (spec/coordinator.md HATP-LOCK-7). A participant without these serves no locks."""

    async def acquire_lock(self, req: LockAcquireRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-1 (LOCKED) while another transaction holds the resource."""
        ...

    async def release_lock(self, req: LockReleaseRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-2 (STALE_TOKEN) when the token is no longer the live lock's."""
        ...


@dataclass(frozen=True)
class ApproverAnswer:
    """The gateway's answer for one approval requirement.

    `vote`: a signed Vote (type hatp.vote), voter = the gateway id, branchId = the requirement id, decision
    yes | no | pending, decideBy = the signed deadline when pending; signed by a key with role "gateway".
    `approval`: the signed Approval once decided (approve or reject), else None.
    `waiting`: while pending, who must act and the inbox link (HATP-MCP-54); words for people, never evidence.
    """

    vote: dict[str, Any]
    approval: dict[str, Any] | None
    waiting: AskWaiting | None = None


class Approver(Protocol):
    """The coordinator talks to humans only through this (shared contract with the Human Gateway)."""

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        """Idempotent per (txnId, requirementId). `terms` (holds-first): the ask opens already bound to them, as
        `tighten` would bind them, before anyone is asked (HATP-GW-30..32)."""
        ...

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer: ...

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        """The transaction aborted: cancel the asks."""
        ...

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        """The gateway's signed worst case until a decision on this requirement (spec/gateway.md HATP-GW-28).
        Stores nothing. Raises HatpError when the gateway would refuse the requirement."""
        ...

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        """Shrink a pending ask's deadline to `terms.decideBy` (never extend it) and bind `terms` (with the holds'
        end times, holds-first) into what the humans sign; answers the re-signed vote (HATP-GW-30..32)."""
        ...


class WatchingApprover(Approver, Protocol):
    """An Approver that can hold a poll open (HATP-MCP-40): the coordinator learns of a decision when it is made,
    not at its next poll. Optional: the runtime uses it when the approver has it, and polls either way."""

    async def wait(self, txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
        """The current answer, once it differs from the one the gateway had when the wait began, or after at most
        `seconds` (the gateway may hold for less). Raises like `poll`."""
        ...

"""A participant's fencing-token locks (HATP-LOCK-1/2), durable: each grant's token is larger than every earlier
one for that resource, across restarts too, so a write guarded by a stale token is refused.

The table is pure (hatp_mcp.core.participant.branch.LockTable); this module loads a resource's lock from the
participant's store before each use and saves it after, on the runtime's clock. It must not know about
transports or branches: hatp_mcp.runtime.participant.driver serves it beside the branch calls.
"""

from __future__ import annotations

from collections.abc import Mapping

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.messages import LockAcquireRequest, LockReleaseRequest, LockRenewRequest, LockResult
from hatp_mcp.core.participant.branch import LockTable, check_lock_owner, check_lock_tokens
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.store.participant_state import ParticipantStore

__all__ = ["FencingLocks"]


class FencingLocks:
    """Acquire, renew, release and check fencing-token locks kept in `store`."""

    def __init__(self, store: ParticipantStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.table = LockTable()

    def _load(self, resource: str) -> None:
        state = self._store.get_lock(resource)
        if state is not None:
            self.table.restore(resource, state)

    def _save(self, resource: str) -> None:
        state = self.table.export(resource)
        if state is not None:
            self._store.put_lock(resource, state)

    def acquire(self, req: LockAcquireRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-5 for an owner that is not the request's txnId, HATP-LOCK-1 while another
        owner holds the resource."""
        check_lock_owner(req.owner, req.txn_id)
        self._load(req.resource)
        token, expires = self.table.acquire(req.resource, req.owner, req.lease_seconds, self._clock.now())
        self._save(req.resource)
        return LockResult(resource=req.resource, owner=req.owner, token=token, expires_at=format_ts(expires))

    def renew(self, req: LockRenewRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-2 for a stale token."""
        now = self._clock.now()
        self._load(req.resource)
        expires = self.table.renew(req.resource, req.token, req.lease_seconds, now)
        self._save(req.resource)
        held = self.table.holder(req.resource, now)
        owner = held[0] if held else "unknown"
        return LockResult(resource=req.resource, owner=owner, token=req.token, expires_at=format_ts(expires))

    def release(self, req: LockReleaseRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-2 for a stale token."""
        now = self._clock.now()
        self._load(req.resource)
        owner = self.table.release(req.resource, req.token, now)
        self._save(req.resource)
        return LockResult(resource=req.resource, owner=owner, token=req.token, expires_at=format_ts(now), released=True)

    def check(self, resource: str, token: int) -> None:
        """Call before a write guarded by a lock. Raises HatpError HATP-LOCK-2 for a stale token."""
        self._load(resource)
        self.table.check(resource, token, self._clock.now())

    def check_branch(self, resources: list[str] | None, tokens: Mapping[str, int] | None) -> None:
        """Before a branch's write: the live token of every resource it locks (HATP-LOCK-6). Raises HatpError
        HATP-LOCK-6 (no token) or HATP-LOCK-2 (stale), code STALE_TOKEN."""
        check_lock_tokens(resources, tokens, self.check)

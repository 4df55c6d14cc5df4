"""A participant's side of HATP, pure: the branch state machine, leases, preconditions, cost and fencing locks.

`BranchMachine` is one (txnId, branchId) on one participant: states are an Enum, transitions a table, and an
illegal event raises HatpError (HATP-PART-8) leaving the state unchanged. `LockTable` hands out fencing tokens.
The runtime wrapper (hatp_mcp/runtime/participant/driver.py) feeds these and keeps them durable. This module does no
IO and never reads the clock: every function takes `now`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from enum import Enum

from hatp_mcp.core.model.amount import Amount, with_tolerance
from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.errors import HatpError

__all__ = [
    "TRANSITIONS",
    "BranchEvent",
    "BranchMachine",
    "BranchState",
    "Lease",
    "LockTable",
    "check_cost",
    "check_lock_owner",
    "check_lock_tokens",
    "check_preconditions",
    "grant_lease",
    "idempotency_key",
    "renew_lease",
]


class BranchState(Enum):
    NONE = "unknown"
    QUOTED = "quoted"
    PREPARED = "prepared"
    REFUSED = "refused"
    COMMITTING = "committing"  # the commit's intent is durable; its effect may have happened (HATP-PART-10)
    COMMITTED = "committed"
    ABORTED = "aborted"
    COMPENSATING = "compensating"  # the undo's intent is durable; the undo may have happened (HATP-PART-12)
    COMPENSATED = "compensated"


class BranchEvent(Enum):
    QUOTE = "quote"
    PREPARE_YES = "prepare-yes"
    PREPARE_NO = "prepare-no"
    RENEW = "renew"
    LOST = "lost"
    COMMIT_INTENT = "commit-intent"
    COMMIT = "commit"
    COMMIT_REFUSED = "commit-refused"
    ABORT = "abort"
    COMPENSATE_INTENT = "compensate-intent"
    COMPENSATE = "compensate"
    COMPENSATE_REFUSED = "compensate-refused"


S, E = BranchState, BranchEvent
TRANSITIONS: dict[tuple[BranchState, BranchEvent], BranchState] = {
    (S.NONE, E.QUOTE): S.QUOTED,
    (S.QUOTED, E.QUOTE): S.QUOTED,
    (S.NONE, E.PREPARE_YES): S.PREPARED,
    (S.QUOTED, E.PREPARE_YES): S.PREPARED,
    (S.NONE, E.PREPARE_NO): S.REFUSED,
    (S.QUOTED, E.PREPARE_NO): S.REFUSED,
    (S.PREPARED, E.RENEW): S.PREPARED,
    (S.PREPARED, E.LOST): S.NONE,
    (S.PREPARED, E.COMMIT_INTENT): S.COMMITTING,
    (S.COMMITTING, E.COMMIT): S.COMMITTED,
    (S.COMMITTING, E.COMMIT_REFUSED): S.PREPARED,  # the operation refused: nothing happened
    (S.NONE, E.ABORT): S.ABORTED,
    (S.QUOTED, E.ABORT): S.ABORTED,
    (S.PREPARED, E.ABORT): S.ABORTED,
    (S.REFUSED, E.ABORT): S.ABORTED,
    (S.ABORTED, E.ABORT): S.ABORTED,
    (S.COMMITTED, E.COMPENSATE_INTENT): S.COMPENSATING,
    (S.COMPENSATING, E.COMPENSATE): S.COMPENSATED,
    (S.COMPENSATING, E.COMPENSATE_REFUSED): S.COMMITTED,
}


@dataclass(frozen=True, slots=True)
class BranchMachine:
    """One branch on one participant. Immutable: `fire` returns the next machine or raises."""

    state: BranchState = BranchState.NONE

    def fire(self, event: BranchEvent) -> BranchMachine:
        """Raises HatpError HATP-PART-8 (code ILLEGAL_TRANSITION) when the table has no such transition."""
        nxt = TRANSITIONS.get((self.state, event))
        if nxt is None:
            raise HatpError(
                "HATP-PART-8",
                f"event {event.value!r} is not allowed in state {self.state.value!r}",
                code="ILLEGAL_TRANSITION",
                fix="query hatp/txn/status and act on the branch's actual state",
            )
        return replace(self, state=nxt)


def idempotency_key(txn_id: str, branch_id: str) -> str:
    """The key a branch's effect (commit) and its undo (compensate) are idempotent on: ``<txnId>:<branchId>``
    (HATP-PART-10). The operation gets it, so a repeated effect with the same key is the same effect."""
    return f"{txn_id}:{branch_id}"


@dataclass(frozen=True, slots=True)
class Lease:
    expires_at: datetime
    horizon: datetime


def grant_lease(branch: Branch, now: datetime, max_lease_seconds: int, max_horizon_seconds: int) -> Lease:
    """The lease a new hold gets: what the branch asked, capped by the participant's limits and its horizon."""
    asked = branch.lease_seconds if branch.lease_seconds is not None else max_lease_seconds
    want_horizon = branch.hold_horizon_seconds if branch.hold_horizon_seconds is not None else max_horizon_seconds
    horizon = now + timedelta(seconds=min(want_horizon, max_horizon_seconds))
    expires = min(now + timedelta(seconds=min(asked, max_lease_seconds)), horizon)
    return Lease(expires, horizon)


def renew_lease(lease: Lease, now: datetime, asked_seconds: int, max_lease_seconds: int) -> Lease:
    """Extend a live lease, never past its horizon. Raises HatpError HATP-PART-4 (HOLD_LOST) once it lapsed."""
    if now >= lease.expires_at:
        raise HatpError(
            "HATP-PART-4",
            "the hold's lease lapsed before it was renewed; the hold is gone",
            path="$.leaseSeconds",
            code="HOLD_LOST",
            fix="prepare the branch again to place a new hold",
        )
    expires = min(now + timedelta(seconds=min(asked_seconds, max_lease_seconds)), lease.horizon)
    return Lease(max(expires, lease.expires_at), lease.horizon)


def check_preconditions(expected: Preconditions, versions: Mapping[str, str], scope: str | None) -> None:
    """Raises HatpError HATP-PART-5 (PRECONDITION_CHANGED) naming the first target whose version moved."""
    for target, version in sorted(expected.versions.items()):
        now_version = versions.get(target)
        if now_version != version:
            raise HatpError(
                "HATP-PART-5",
                f"{target} was version {version!r} at prepare and is {now_version!r} now",
                path=f"$.preconditions.versions.{target}",
                code="PRECONDITION_CHANGED",
                fix="abort, and prepare a new transaction the human approves with the new values",
            )
    if expected.credential_scope is not None and expected.credential_scope != scope:
        raise HatpError(
            "HATP-PART-5",
            f"the credential scope was {expected.credential_scope!r} at prepare and is {scope!r} now",
            path="$.preconditions.credentialScope",
            code="PRECONDITION_CHANGED",
            fix="abort, and prepare a new transaction with the new credentials",
        )


def check_cost(branch: Branch, reported: Amount | None, index: int = 0) -> None:
    """Raises HatpError HATP-PART-3 (COST_UNDERSTATED) when the plan's bound is below what this branch costs.

    A branch that costs money but names no amount understates it (a missing bound never covers a cost), and a
    branch whose cost another pays (`settles`) is fine: the payer names it.
    """
    if reported is None or reported.decimal == Decimal(0):
        return
    path = f"$.branches[{index}].amount"
    if branch.amount is None:
        raise HatpError(
            "HATP-PART-3",
            f"this operation costs {reported.display()} but the plan states no amount",
            path=path,
            code="COST_UNDERSTATED",
            fix="state the amount in the plan and ask the approver again",
        )
    if branch.amount.currency != reported.currency or reported.decimal > with_tolerance(
        branch.amount, branch.tolerance_percent
    ):
        raise HatpError(
            "HATP-PART-3",
            f"this operation costs {reported.display()}, more than the plan's {branch.amount.display()}"
            f" (tolerance {branch.tolerance_percent or '0'}%)",
            path=path,
            code="COST_UNDERSTATED",
            fix="state the real cost in the plan and ask the approver again",
        )


def check_lock_owner(owner: str, txn_id: str) -> None:
    """HATP-LOCK-5: a lock is held by the transaction its proof names. Raises HatpError (code AUTH_MISMATCH)."""
    if owner != txn_id:
        raise HatpError(
            "HATP-LOCK-5",
            f"the lock's owner is {owner!r}, but the request is for transaction {txn_id!r}",
            path="$.owner",
            code="AUTH_MISMATCH",
            fix="acquire a lock with `owner` set to the txnId the request (and its auth) names",
        )


def check_lock_tokens(
    resources: list[str] | None, tokens: Mapping[str, int] | None, check: Callable[[str, int], object]
) -> None:
    """HATP-LOCK-6: a commit of a branch that names `locks` carries the live fencing token of each, which `check`
    (a LockTable's, at the commit's time) proves. Raises HatpError HATP-LOCK-6 for a missing token, HATP-LOCK-2
    for a stale one (code STALE_TOKEN both), naming the resource."""
    for resource in sorted(set(resources or ())):
        token = (tokens or {}).get(resource)
        if token is None:
            raise HatpError(
                "HATP-LOCK-6",
                f"the branch writes {resource}, which it locks, and the commit carries no fencing token for it",
                path=f"$.lockTokens.{resource}",
                code="STALE_TOKEN",
                fix="acquire the lock (hatp/lock/acquire) and send its token in the commit's lockTokens",
            )
        try:
            check(resource, token)
        except HatpError as exc:
            raise HatpError(exc.rule, exc.reason, path=f"$.lockTokens.{resource}", code=exc.code, fix=exc.fix) from exc


@dataclass(frozen=True, slots=True)
class _Lock:
    owner: str
    token: int
    expires_at: datetime
    released: bool


class LockTable:
    """Fencing-token locks: each grant's token is larger than every earlier one for that resource."""

    def __init__(self) -> None:
        self._locks: dict[str, _Lock] = {}

    def _live(self, resource: str, now: datetime) -> _Lock | None:
        lock = self._locks.get(resource)
        if lock is None or lock.released or now >= lock.expires_at:
            return None
        return lock

    def acquire(self, resource: str, owner: str, lease_seconds: int, now: datetime) -> tuple[int, datetime]:
        """Return (token, expiresAt). Raises HatpError HATP-LOCK-1 (LOCKED) while another owner holds it."""
        live = self._live(resource, now)
        if live is not None and live.owner != owner:
            raise HatpError(
                "HATP-LOCK-1",
                f"{resource} is locked by {live.owner} until its lease ends",
                path="$.resource",
                code="LOCKED",
                fix="wait for the lease to end or for the holder to release it",
            )
        last = self._locks.get(resource)
        token = (last.token if last else 0) + 1
        expires = now + timedelta(seconds=lease_seconds)
        self._locks[resource] = _Lock(owner, token, expires, False)
        return token, expires

    def check(self, resource: str, token: int, now: datetime) -> _Lock:
        """Raises HatpError HATP-LOCK-2 (STALE_TOKEN) unless `token` is the live lock's token."""
        live = self._live(resource, now)
        if live is None or live.token != token:
            current = f"the live token is {live.token}" if live else "no lock is live"
            raise HatpError(
                "HATP-LOCK-2",
                f"token {token} for {resource} is stale: {current}",
                path="$.token",
                code="STALE_TOKEN",
                fix="acquire the lock again and write with the new token",
            )
        return live

    def renew(self, resource: str, token: int, lease_seconds: int, now: datetime) -> datetime:
        """Raises HatpError HATP-LOCK-2 for a stale token."""
        live = self.check(resource, token, now)
        expires = now + timedelta(seconds=lease_seconds)
        self._locks[resource] = replace(live, expires_at=expires)
        return expires

    def release(self, resource: str, token: int, now: datetime) -> str:
        """Returns the owner. Raises HatpError HATP-LOCK-2 for a stale token."""
        live = self.check(resource, token, now)
        self._locks[resource] = replace(live, released=True)
        return live.owner

    def export(self, resource: str) -> dict[str, object] | None:
        """The resource's lock as plain data (for a durable store), live or not: the last token must survive."""
        lock = self._locks.get(resource)
        if lock is None:
            return None
        return {"owner": lock.owner, "token": lock.token, "expiresAt": lock.expires_at, "released": lock.released}

    def restore(self, resource: str, data: dict[str, object]) -> None:
        """Load what `export` returned. Raises ValueError on malformed data."""
        owner, token, expires, released = data["owner"], data["token"], data["expiresAt"], data["released"]
        if not (isinstance(owner, str) and isinstance(token, int) and isinstance(expires, datetime)):
            raise ValueError(f"malformed lock state for {resource}")
        self._locks[resource] = _Lock(owner, token, expires, bool(released))

    def holder(self, resource: str, now: datetime) -> tuple[str, int, datetime] | None:
        live = self._live(resource, now)
        return (live.owner, live.token, live.expires_at) if live else None

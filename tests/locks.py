"""Lock requests for tests: each names the transaction's branch it locks for (spec/coordinator.md HATP-LOCK-4, 5)."""

from __future__ import annotations

from hatp_mcp.core.model.messages import LockAcquireRequest, LockReleaseRequest, LockRenewRequest

__all__ = ["DIGEST", "acquire", "release", "renew"]

DIGEST = "sha256:" + "0" * 64


def acquire(
    resource: str, owner: str, lease_seconds: int = 30, *, txn_id: str | None = None, branch_id: str = "seat"
) -> LockAcquireRequest:
    """An acquire for `owner`'s transaction (`txn_id` defaults to `owner`, as HATP-LOCK-5 wants)."""
    return LockAcquireRequest(
        resource=resource,
        owner=owner,
        lease_seconds=lease_seconds,
        txn_id=txn_id or owner,
        branch_id=branch_id,
        plan_digest=DIGEST,
    )


def renew(resource: str, token: int, txn_id: str, lease_seconds: int = 30) -> LockRenewRequest:
    return LockRenewRequest(
        resource=resource, token=token, lease_seconds=lease_seconds, txn_id=txn_id, branch_id="seat", plan_digest=DIGEST
    )


def release(resource: str, token: int, txn_id: str) -> LockReleaseRequest:
    return LockReleaseRequest(resource=resource, token=token, txn_id=txn_id, branch_id="seat", plan_digest=DIGEST)

"""The coordinator's signed authorization of one state-changing request (`auth` in hatp/txn/* params).

A `TxnAuth` says: coordinator C asks this receiver to run `method` on (txnId, branchId) of the plan with digest
planDigest, for exactly the request whose digest is requestDigest, between issuedAt and expiresAt. It rides in
the request's params (spec/mcp-binding.md HATP-TRUST-1..12), so it works the same on stdio and streamable HTTP
and in both SDK eras. `epoch` is the coordinator's fencing token: its lease epoch for the transaction, which a
receiver compares with the highest it has admitted (HATP-TRUST-9). Pure: no IO.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from hatp_mcp.core.model.base import Ident, SignedModel, Timestamp
from hatp_mcp.core.model.evidence import DIGEST_PATTERN

__all__ = ["AUTH_METHODS", "AuthMethod", "TxnAuth", "auth_method"]

AuthMethod = Literal[
    "prepare",
    "quote",
    "commit",
    "abort",
    "compensate",
    "renew",
    "tighten",
    "lock-acquire",
    "lock-renew",
    "lock-release",
]
AUTH_METHODS: frozenset[str] = frozenset(get_args(AuthMethod))


def auth_method(rpc_method: str) -> str:
    """The `method` an auth names for a JSON-RPC method: its last segment (`hatp/txn/commit` -> `commit`), and
    `lock-<segment>` for `hatp/lock/*` (HATP-LOCK-4), so a lock's renew is never a hold's renew."""
    head, _, last = rpc_method.rpartition("/")
    return f"lock-{last}" if head == "hatp/lock" else last


class TxnAuth(SignedModel):
    """Signed by a key of the coordinator (role `coordinator`, bound to `coordinator` in the receiver's trust list).

    `branchId` is the branch (a participant) or the approval requirement (the Human Gateway) the request names.
    `requestDigest` is the digest of the request's params without their `auth` member."""

    type: Literal["hatp.txn-auth"] = "hatp.txn-auth"
    method: AuthMethod
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    coordinator: str = Field(min_length=1, max_length=500)
    request_digest: str = Field(pattern=DIGEST_PATTERN)
    issued_at: Timestamp
    expires_at: Timestamp
    epoch: int | None = Field(default=None, ge=0, le=2**53 - 1)

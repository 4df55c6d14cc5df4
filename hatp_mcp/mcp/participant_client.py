"""`mcp_participant(uri, client, keyring)`: the Participant Protocol over an MCP client session.

Each method sends its hatp/txn/* request (hatp_mcp.mcp.call), then checks the evidence that came back before the
coordinator sees it: every vote and receipt must be signed by a key of this participant's keyring with the role
"participant", and must name the txnId, branchId and planDigest that were asked about (HATP-MCP-4). A refusal
or a missing answer is raised as a HatpError / TransportFailed, never returned as if the participant had voted.
A caller that feeds every vote and receipt to the coordinator core may pass `verify=False`: the core verifies the
signature, that the signing key's keyring entry is bound to the branch's participant (HATP-SIG-6), and the txnId,
branchId, planDigest and voter/participant named (HATP-TXN-2), so nothing is checked twice here. Status receipts
are always fully verified (the core never sees them). This module keeps no transaction state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import Client

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
from hatp_mcp.core.signing.keys import Keyring, SignatureError
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import Signer, call
from hatp_mcp.runtime.interfaces import Participant

__all__ = ["McpParticipant", "check_evidence", "mcp_participant"]


def check_evidence(
    obj: Mapping[str, Any],
    keyring: Keyring,
    path: str,
    *,
    txn_id: str,
    branch_id: str,
    plan_digest: str | None,
    signer: str | None,
) -> None:
    """HATP-MCP-4: `obj` is signed by a participant key of `keyring` and names what was asked.

    Raises HatpError HATP-MCP-4 (code SIGNATURE_INVALID or EVIDENCE_MISMATCH) naming the path.
    """
    try:
        verify_raw(obj, keyring, "participant", path)
    except SignatureError as exc:
        raise HatpError(
            "HATP-MCP-4",
            f"{exc.rule}: {exc.reason}",
            path=exc.path,
            code="SIGNATURE_INVALID",
            fix="add the participant's public key (role participant) to the keyring you pass to mcp_participant",
        ) from exc
    expected: dict[str, str | None] = {"txnId": txn_id, "branchId": branch_id, "planDigest": plan_digest}
    who = obj.get("voter", obj.get("participant"))
    for name, want in expected.items():
        if want is not None and obj.get(name) != want:
            raise HatpError(
                "HATP-MCP-4",
                f"the evidence names {name} {obj.get(name)!r}, not {want!r}",
                path=f"{path}.{name}",
                code="EVIDENCE_MISMATCH",
            )
    if signer is not None and who != signer:
        raise HatpError(
            "HATP-MCP-4", f"the evidence is from {who!r}, not {signer!r}", path=path, code="EVIDENCE_MISMATCH"
        )


class McpParticipant:
    """A remote participant. `timeout` bounds each call (seconds); None means the client's default.

    `verify=False` only for a caller whose answers all go through the coordinator core (HATP-TXN-2): see above."""

    def __init__(
        self,
        uri: str,
        client: Client,
        keyring: Keyring,
        *,
        timeout: float | None = 30.0,
        verify: bool = True,
        signer: Signer | None = None,
    ) -> None:
        self.uri = uri
        self.client = client
        self._keyring = keyring
        self.timeout = timeout
        self.verify = verify
        self.signer = signer  # the coordinator's: every state-changing request carries its auth (HATP-TRUST-11)

    def _check(self, obj: Mapping[str, Any], path: str, txn_id: str, branch_id: str, digest: str | None) -> None:
        if not self.verify:  # the coordinator core checks all of it (HATP-TXN-2, HATP-SIG-6)
            return
        check_evidence(
            obj, self._keyring, path, txn_id=txn_id, branch_id=branch_id, plan_digest=digest, signer=self.uri
        )

    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        method = "hatp/txn/quote" if req.quote_only else "hatp/txn/prepare"
        result = await call(self.client, method, req, PrepareResult, self.timeout, self.signer)
        self._check(result.vote, "$.vote", req.txn_id, req.branch_id, req.plan_digest)
        self._check(result.receipt, "$.receipt", req.txn_id, req.branch_id, req.plan_digest)
        return result

    async def _branch(self, method: str, req: Any) -> BranchResult:
        result = await call(self.client, method, req, BranchResult, self.timeout, self.signer)
        self._check(result.receipt, "$.receipt", req.txn_id, req.branch_id, req.plan_digest)
        return result

    async def commit(self, req: CommitRequest) -> BranchResult:
        return await self._branch("hatp/txn/commit", req)

    async def abort(self, req: AbortRequest) -> BranchResult:
        return await self._branch("hatp/txn/abort", req)

    async def compensate(self, req: CompensateRequest) -> BranchResult:
        return await self._branch("hatp/txn/compensate", req)

    async def renew(self, req: RenewRequest) -> BranchResult:
        return await self._branch("hatp/txn/renew", req)

    async def acquire_lock(self, req: LockAcquireRequest) -> LockResult:
        """hatp/lock/acquire, signed like every state-changing request (HATP-LOCK-4)."""
        return await call(self.client, "hatp/lock/acquire", req, LockResult, self.timeout, self.signer)

    async def release_lock(self, req: LockReleaseRequest) -> LockResult:
        """hatp/lock/release, signed (HATP-LOCK-4)."""
        return await call(self.client, "hatp/lock/release", req, LockResult, self.timeout, self.signer)

    async def status(self, req: StatusRequest) -> StatusResult:
        result = await call(self.client, "hatp/txn/status", req, StatusResult, self.timeout)
        if result.receipt is not None:  # always verified: a status answer never reaches the core's HATP-TXN-2
            check_evidence(
                result.receipt,
                self._keyring,
                "$.receipt",
                txn_id=req.txn_id,
                branch_id=req.branch_id,
                plan_digest=None,
                signer=self.uri,
            )
        return result


def mcp_participant(
    uri: str,
    client: Client,
    keyring: Keyring,
    *,
    timeout: float | None = 30.0,
    verify: bool = True,
    signer: Signer | None = None,
) -> Participant:
    """A Participant speaking to `uri` over `client`; evidence checked against `keyring` (this participant's keys).

    `signer` (a coordinator's `RequestSigner.sign`): signs every state-changing request; without it a participant
    refuses them all (HATP-TRUST-1). `verify=False`: only for a caller that hands every answer to the coordinator
    core (see the module docstring)."""
    return McpParticipant(uri, client, keyring, timeout=timeout, verify=verify, signer=signer)

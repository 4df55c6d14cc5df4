"""`mcp_approver(client, keyring)`: the coordinator's Approver (hatp_mcp/runtime/interfaces.py) over an MCP client
session to a Human Gateway server (hatp_mcp/mcp/gateway_server.py).

Trust nothing the wire says (HATP-MCP-11): every vote and approval must be signed by a key of `keyring` with the
role `gateway` (the organisation's well-known keys, never the keys the server advertises), must name the txnId,
requirement and plan digest that were asked about (and the gateway id, when given), a pending vote must carry its
signed deadline, and an approval must agree with the vote. A refusal, a missing ask or no answer at all is raised
(HatpError / TransportFailed), never handed to the coordinator as if the gateway had voted. No transaction state
is kept here beyond the plan digest of each ask, learned from the answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import Client

from hatp_mcp.core.gateway.terms import same_terms
from hatp_mcp.core.model.estimate import Estimate, EstimateRequest, TightenRequest
from hatp_mcp.core.model.evidence import Approval, Vote
from hatp_mcp.core.model.gateway_messages import VotedRequest, VoteResult
from hatp_mcp.core.model.messages import AbortRequest, PrepareRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.model.wire import WireError, parse
from hatp_mcp.core.signing.keys import Keyring, SignatureError
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import Signer, call, call_raw
from hatp_mcp.runtime.interfaces import Approver, ApproverAnswer

__all__ = ["McpApprover", "check_answer", "check_estimate", "check_tightened", "mcp_approver"]

_AGREES = {"yes": ("approve",), "no": ("reject", None), "pending": (None,)}


def _mismatch(reason: str, path: str) -> HatpError:
    return HatpError("HATP-MCP-11", reason, path=path, code="EVIDENCE_MISMATCH")


def _signed(obj: Mapping[str, Any], keyring: Keyring, path: str) -> None:
    try:
        verify_raw(obj, keyring, "gateway", path)
    except SignatureError as exc:
        raise HatpError(
            "HATP-MCP-11",
            f"{exc.rule}: {exc.reason}",
            path=exc.path,
            code="SIGNATURE_INVALID",
            fix="build the keyring from the organisation's well-known document (keys with role gateway)",
        ) from exc


def _names(obj: Mapping[str, Any], path: str, expected: Mapping[str, str | None]) -> None:
    for name, want in expected.items():
        if want is not None and obj.get(name) != want:
            raise _mismatch(f"the evidence names {name} {obj.get(name)!r}, not {want!r}", f"{path}.{name}")


def check_answer(
    result: VoteResult,
    keyring: Keyring,
    *,
    txn_id: str,
    requirement_id: str,
    plan_digest: str | None,
    gateway_id: str | None,
) -> ApproverAnswer:
    """HATP-MCP-11: the checked answer. Raises HatpError (SIGNATURE_INVALID, EVIDENCE_MISMATCH, BAD_RESULT)."""
    _names(result.wire(), "$", {"txnId": txn_id, "requirementId": requirement_id})
    _signed(result.vote, keyring, "$.vote")
    try:
        vote = parse(Vote, result.vote, "$.vote")
        approval = parse(Approval, result.approval, "$.approval") if result.approval is not None else None
    except WireError as exc:
        raise HatpError("HATP-MCP-2", exc.reason, path=exc.path, code="BAD_RESULT") from exc
    _names(
        result.vote,
        "$.vote",
        {"txnId": txn_id, "branchId": requirement_id, "planDigest": plan_digest, "voter": gateway_id},
    )
    if vote.decision == "pending" and vote.decide_by is None:
        raise _mismatch("a pending vote without its signed deadline would wait unbounded", "$.vote.decideBy")
    decided = approval.decision if approval is not None else None
    if decided not in _AGREES[vote.decision]:
        raise _mismatch(f"a {vote.decision!r} vote with approval decision {decided!r}", "$.approval.decision")
    if result.approval is not None and approval is not None:
        _signed(result.approval, keyring, "$.approval")
        _names(
            result.approval,
            "$.approval",
            {"txnId": txn_id, "requirementId": requirement_id, "planDigest": vote.plan_digest, "gateway": gateway_id},
        )
        if approval.subject != "plan":
            raise _mismatch(f"an approval of a {approval.subject!r}, not of the plan", "$.approval.subject")
    waiting = result.waiting if vote.decision == "pending" else None  # words for people (HATP-MCP-54)
    return ApproverAnswer(vote=result.vote, approval=result.approval, waiting=waiting)


def check_estimate(
    raw: Mapping[str, Any], keyring: Keyring, *, plan: Plan, requirement_id: str, gateway_id: str | None
) -> Estimate:
    """HATP-MCP-17: a gateway's estimate counts only signed by a `gateway` key of `keyring` and naming the plan,
    txnId and requirement asked about (and the gateway, when known). Raises HatpError."""
    _signed(raw, keyring, "$")
    try:
        est = parse(Estimate, dict(raw), "$")
    except WireError as exc:
        raise HatpError("HATP-MCP-2", exc.reason, path=exc.path, code="BAD_RESULT") from exc
    expected = {"txnId": plan.txn_id, "requirementId": requirement_id, "planDigest": plan.digest()}
    _names(raw, "$", expected | {"gateway": gateway_id})
    return est


def check_tightened(answer: ApproverAnswer, terms: ApprovalTerms) -> ApproverAnswer:
    """HATP-MCP-18: after tighten, a pending vote's signed `decideBy` is the deadline sent (never later), and an
    approval that came with it carries the terms sent when it approves. Raises HatpError (EVIDENCE_MISMATCH)."""
    vote = answer.vote
    if vote.get("decision") == "pending" and vote.get("decideBy") != terms.decide_by:
        raise HatpError(
            "HATP-MCP-18",
            f"the pending vote's deadline is {vote.get('decideBy')}, not the {terms.decide_by} sent",
            path="$.vote.decideBy",
            code="EVIDENCE_MISMATCH",
        )
    approval = answer.approval
    if approval is not None and approval.get("decision") == "approve":
        got = approval.get("terms")
        if not same_terms(ApprovalTerms.model_validate(got) if got is not None else None, terms):
            raise HatpError(
                "HATP-MCP-18",
                "the approval carries other terms than the ones sent",
                path="$.approval.terms",
                code="EVIDENCE_MISMATCH",
            )
    return answer


class McpApprover:
    """A remote Human Gateway. `timeout` bounds each call (seconds); None means the client's default."""

    def __init__(
        self,
        client: Client,
        keyring: Keyring,
        *,
        timeout: float | None = 30.0,
        gateway_id: str | None = None,
        coordinator: str = "hatp-coordinator",
        signer: Signer | None = None,
    ) -> None:
        self.client = client
        self._keyring = keyring
        self.timeout = timeout
        self.gateway_id = gateway_id
        self.coordinator = coordinator
        self.signer = signer  # the coordinator's: ask, tighten and withdraw carry its auth (HATP-TRUST-11)
        self._digests: dict[tuple[str, str], str] = {}

    def _checked(self, result: VoteResult, txn_id: str, rid: str, digest: str | None) -> ApproverAnswer:
        answer = check_answer(
            result, self._keyring, txn_id=txn_id, requirement_id=rid, plan_digest=digest, gateway_id=self.gateway_id
        )
        self._digests[(txn_id, rid)] = str(answer.vote["planDigest"])
        return answer

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        """Ask (hatp/txn/prepare); `terms` (holds-first) travel with the ask, so the gateway opens it bound to them
        before anyone is notified and no one decides without them (HATP-MCP-29); the answer is checked as a
        tighten's (HATP-MCP-18)."""
        digest = plan.digest()
        req = PrepareRequest(
            txn_id=plan.txn_id,
            branch_id=requirement_id,
            plan_digest=digest,
            plan=plan,
            coordinator=self.coordinator,
            terms=terms,
        )
        result = await call(self.client, "hatp/txn/prepare", req, VoteResult, self.timeout, self.signer)
        answer = self._checked(result, plan.txn_id, requirement_id, digest)
        return answer if terms is None else check_tightened(answer, terms)

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer:
        req = VotedRequest(txn_id=txn_id, requirement_id=requirement_id)
        result = await call(self.client, "hatp/txn/voted", req, VoteResult, self.timeout)
        return self._checked(result, txn_id, requirement_id, self._digests.get((txn_id, requirement_id)))

    async def wait(self, txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
        """HATP-MCP-40: `poll` held open by the gateway until its answer changes, at most `seconds` (whole
        seconds on the wire, at least 1); the read timeout is the hold plus this approver's `timeout`."""
        hold = max(1, min(300, int(seconds)))
        req = VotedRequest(txn_id=txn_id, requirement_id=requirement_id, wait_seconds=hold)
        result = await call(self.client, "hatp/txn/voted", req, VoteResult, hold + (self.timeout or 30.0))
        return self._checked(result, txn_id, requirement_id, self._digests.get((txn_id, requirement_id)))

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        req = EstimateRequest(txn_id=plan.txn_id, requirement_id=requirement_id, plan_digest=plan.digest(), plan=plan)
        raw = await call_raw(self.client, "hatp/txn/estimate", req.wire(), self.timeout)
        return check_estimate(raw, self._keyring, plan=plan, requirement_id=requirement_id, gateway_id=self.gateway_id)

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        digest = self._digests.get((txn_id, requirement_id))
        if digest is None:
            digest = str((await self.poll(txn_id, requirement_id)).vote["planDigest"])
        req = TightenRequest(
            txn_id=txn_id,
            requirement_id=requirement_id,
            plan_digest=digest,
            decide_by=terms.decide_by,
            holds=terms.holds,
        )
        result = await call(self.client, "hatp/txn/tighten", req, VoteResult, self.timeout, self.signer)
        return check_tightened(self._checked(result, txn_id, requirement_id, digest), terms)

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        """Withdraw the ask; an ask the gateway never got needs no withdrawing."""
        try:
            digest = self._digests.get((txn_id, requirement_id))
            if digest is None:  # e.g. a restarted coordinator: learn the digest from the signed vote
                digest = str((await self.poll(txn_id, requirement_id)).vote["planDigest"])
            req = AbortRequest(txn_id=txn_id, branch_id=requirement_id, plan_digest=digest, reason="aborted")
            result = await call(self.client, "hatp/txn/abort", req, VoteResult, self.timeout, self.signer)
        except HatpError as exc:
            if exc.code == "NO_SUCH_ASK":
                return
            raise
        self._checked(result, txn_id, requirement_id, digest)


def mcp_approver(
    client: Client,
    keyring: Keyring,
    *,
    timeout: float | None = 30.0,
    gateway_id: str | None = None,
    coordinator: str = "hatp-coordinator",
    signer: Signer | None = None,
) -> Approver:
    """An Approver speaking to a Human Gateway over `client`; evidence checked against `keyring` (role gateway).

    `gateway_id` (the well-known `gateway`), when given, must be the voter of every vote and the gateway of every
    approval. `coordinator` is the id sent in each PrepareRequest. `signer` (that coordinator's
    `RequestSigner.sign`) signs ask, tighten and withdraw; without it the gateway refuses them (HATP-TRUST-1).
    """
    return McpApprover(client, keyring, timeout=timeout, gateway_id=gateway_id, coordinator=coordinator, signer=signer)

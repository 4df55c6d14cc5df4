"""What the coordinator checks before it counts a participant's or an approver's answer. Pure: no IO.

A participant's evidence counts only when the key that signed it is bound (by its keyring entry's `party`) to
exactly the branch's participant: the coordinator's one keyring holds every party's keys, so the role alone
cannot tell the hotel's key from the airline's (HATP-TXN-2, code KEY_NOT_THE_PARTICIPANTS; an unbound key is
refused too). Evidence that fails a check is never counted as a yes and never chained into the record (the record
would no longer verify); the coordinator records the refusal instead and aborts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from hatp_mcp.core.gateway.agents import AgentKeys, verify_request
from hatp_mcp.core.gateway.ask_evidence import check_routing
from hatp_mcp.core.gateway.authority import plan_money
from hatp_mcp.core.gateway.proof import HumanKeys, check_decision_proofs
from hatp_mcp.core.gateway.requirement import HumanRequirement, check_humans_meet
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.evidence import Approval, Receipt, Vote
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.model.wire import error_path
from hatp_mcp.core.signing.keys import Keyring, SignatureError, check_party, check_role
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import BrokenInvariant, HatpError

__all__ = [
    "check_approval_meets",
    "check_approver_answer",
    "check_branch_receipt",
    "check_branch_vote",
    "check_plan_requester",
    "moves_money",
]


def _parse(model: type[Vote] | type[Receipt] | type[Approval], raw: Mapping[str, Any], rule: str, what: str) -> Any:
    try:
        return model.model_validate(dict(raw))
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        raise HatpError(
            rule, f"{what}: {error_path(tuple(e['loc']))}: {e['msg']}", path=what, code="BAD_EVIDENCE"
        ) from exc


def _same(rule: str, what: str, field: str, got: object, want: object) -> None:
    if got != want:
        raise HatpError(
            rule,
            f"{what} names {field} {got!r}, not {want!r}: it is not evidence about this branch of this plan",
            path=f"{what}.{field}",
            code="BAD_EVIDENCE",
        )


def _verify(raw: Mapping[str, Any], keyring: Keyring, role: str, rule: str, what: str, signer: str | None) -> str:
    """The signature over `raw` holds and its key may sign as `role`; returns the kid. `signer`: the kid whose
    signature over this very object the caller verified earlier in the same check (a record's checker verifies each
    piece of evidence once, on its chain pass, and tells `justify`), so only the role is left to check."""
    entry = None if signer is None else keyring.get(signer)
    if signer is not None and entry is None:
        raise BrokenInvariant(f"the signature by {signer} was verified and the keyring no longer has its key")
    try:
        if entry is None:
            return verify_raw(raw, keyring, role, what)
        check_role(entry, role, what)
        return entry.kid
    except HatpError as exc:
        raise HatpError(rule, f"{what}: {exc.rule}: {exc.reason}", path=exc.path, code="BAD_SIGNATURE") from exc


def _signed_by_participant(kid: str, keyring: Keyring, branch: Branch, what: str) -> None:
    entry = keyring.get(kid)
    if entry is None:
        raise BrokenInvariant(f"verify_raw found key {kid} and the keyring no longer has it")
    try:
        check_party(entry, branch.participant, f"{what}.signature.kid", required=True)
    except SignatureError as exc:
        raise HatpError(
            "HATP-TXN-2",
            f"{what} for branch {branch.branch_id!r}: {exc.rule}: {exc.reason}",
            path=exc.path,
            code="KEY_NOT_THE_PARTICIPANTS",
            fix=f"the {what} must be signed by a key whose keyring entry names {branch.participant!r} as its party",
        ) from exc


def check_branch_vote(
    plan: Plan, plan_digest: str, branch: Branch, raw: Mapping[str, Any], keyring: Keyring, signer: str | None = None
) -> Vote:
    """Raises HatpError HATP-TXN-2 unless the vote is the branch participant's, signed by a key bound to that
    participant, about this plan. `signer`: see `_verify`."""
    kid = _verify(raw, keyring, "participant", "HATP-TXN-2", "vote", signer)
    _signed_by_participant(kid, keyring, branch, "vote")
    vote: Vote = _parse(Vote, raw, "HATP-TXN-2", "vote")
    _same("HATP-TXN-2", "vote", "txnId", vote.txn_id, plan.txn_id)
    _same("HATP-TXN-2", "vote", "planDigest", vote.plan_digest, plan_digest)
    _same("HATP-TXN-2", "vote", "branchId", vote.branch_id, branch.branch_id)
    _same("HATP-TXN-2", "vote", "voter", vote.voter, branch.participant)
    return vote


def check_branch_receipt(
    plan: Plan,
    plan_digest: str,
    branch: Branch,
    raw: Mapping[str, Any],
    keyring: Keyring,
    phases: set[str],
    signer: str | None = None,
) -> Receipt:
    """Raises HatpError HATP-TXN-2 unless the receipt is the participant's, signed by a key bound to that
    participant, about this branch and phase. `signer`: see `_verify`."""
    kid = _verify(raw, keyring, "participant", "HATP-TXN-2", "receipt", signer)
    _signed_by_participant(kid, keyring, branch, "receipt")
    receipt: Receipt = _parse(Receipt, raw, "HATP-TXN-2", "receipt")
    _same("HATP-TXN-2", "receipt", "txnId", receipt.txn_id, plan.txn_id)
    _same("HATP-TXN-2", "receipt", "planDigest", receipt.plan_digest, plan_digest)
    _same("HATP-TXN-2", "receipt", "branchId", receipt.branch_id, branch.branch_id)
    _same("HATP-TXN-2", "receipt", "participant", receipt.participant, branch.participant)
    if receipt.phase not in phases:
        raise HatpError(
            "HATP-TXN-2",
            f"a {receipt.phase} receipt answers a {sorted(phases)} call",
            path="receipt.phase",
            code="BAD_EVIDENCE",
        )
    return receipt


def _signed_by_gateway(kid: str, keyring: Keyring, gateway: str, what: str) -> None:
    """HATP-TXN-3 with HATP-SIG-6: the key's entry must name the gateway the object speaks for (fail closed)."""
    entry = keyring.get(kid)
    if entry is None:
        raise BrokenInvariant(f"verify_raw found key {kid} and the keyring no longer has it")
    try:
        check_party(entry, gateway, f"{what}.signature.kid", required=True)
    except SignatureError as exc:
        raise HatpError(
            "HATP-TXN-3",
            f"{what} of gateway {gateway!r}: {exc.rule}: {exc.reason}",
            path=exc.path,
            code="KEY_NOT_THE_GATEWAYS",
            fix="bind the gateway's key to its id in the coordinator's keyring (servers.coordinator --gateway-id)",
        ) from exc


def moves_money(plan: Plan) -> bool:
    return any(b.amount is not None for b in plan.branches) or any(r.max_amount is not None for r in plan.approvals)


def check_approver_answer(
    plan: Plan,
    plan_digest: str,
    requirement_id: str,
    vote_raw: Mapping[str, Any],
    approval_raw: Mapping[str, Any] | None,
    keyring: Keyring,
    now: datetime | None = None,
    humans: HumanKeys | None = None,
    signers: tuple[str | None, str | None] = (None, None),
) -> tuple[Vote, Approval | None]:
    """Raises HatpError HATP-TXN-3 unless the gateway's vote (and approval) may count, HATP-TXN-19 when `humans`
    (the keys on the organisation's cards) is given and a human decision lacks its person's valid proof.

    Both signed by a gateway-role key, both naming this txnId and plan digest; pending names its deadline; yes
    comes with an Approval that approves, has not expired at `now`, whose quorum is met by distinct approvers,
    and whose routing record's authority check ran (`checked.status == "checked"`) whenever the plan moves money.
    `signers`: the vote's and the approval's, see `_verify`.
    """
    rule = "HATP-TXN-3"
    vote_kid = _verify(vote_raw, keyring, "gateway", rule, "vote", signers[0])
    vote: Vote = _parse(Vote, vote_raw, rule, "vote")
    _signed_by_gateway(vote_kid, keyring, vote.voter, "vote")
    _same(rule, "vote", "txnId", vote.txn_id, plan.txn_id)
    _same(rule, "vote", "planDigest", vote.plan_digest, plan_digest)
    _same(rule, "vote", "branchId", vote.branch_id, requirement_id)
    if vote.decision == "pending" and vote.decide_by is None:
        raise HatpError(rule, "a pending vote must sign its decideBy", path="vote.decideBy", code="BAD_EVIDENCE")
    if vote.decision == "yes" and approval_raw is None:
        raise HatpError(rule, "a yes vote without its Approval is not an approval", path="approval", code="NO_APPROVAL")
    if approval_raw is None:
        return vote, None
    approval_kid = _verify(approval_raw, keyring, "gateway", rule, "approval", signers[1])
    approval: Approval = _parse(Approval, approval_raw, rule, "approval")
    _signed_by_gateway(approval_kid, keyring, approval.gateway, "approval")
    _same(rule, "approval", "txnId", approval.txn_id, plan.txn_id)
    _same(rule, "approval", "planDigest", approval.plan_digest, plan_digest)
    _same(rule, "approval", "requirementId", approval.requirement_id, requirement_id)
    _same(rule, "approval", "subject", approval.subject, "plan")
    want = {"yes": "approve", "no": "reject"}.get(vote.decision)
    if want is not None:
        _same(rule, "approval", "decision", approval.decision, want)
    if approval.decision == "approve" and now is not None and approval.expires_at is not None:
        if parse_ts(approval.expires_at) <= now:
            raise HatpError(
                rule,
                f"the approval expired at {when_words(approval.expires_at)}",  # journaled: no countdown (HATP-GW-97)
                path="approval.expiresAt",
                code="APPROVAL_EXPIRED",
                fix="ask the approver again",
            )
    if approval.decision == "approve":
        if moves_money(plan) and approval.routing.checked.status != "checked":
            raise HatpError(
                rule,
                f"the plan moves money but the gateway's authority check is {approval.routing.checked.status!r}:"
                " an absent check never counts as a pass",
                path="approval.routing.checked.status",
                code="AUTHORITY_NOT_CHECKED",
            )
        _same(rule, "approval", "routing.planDigest", approval.routing.plan_digest, plan_digest)
        try:
            # the amounts the gateway checked authority against must be the plan's own, recomputed here
            check_routing(approval.routing, plan, plan_digest)
        except HatpError as exc:
            raise HatpError(
                rule,
                f"the approval's routing record does not hold against the plan: {exc.reason}",
                path=f"approval.routing{exc.path.removeprefix('$.routing')}",
                code=exc.code,
            ) from exc
    try:
        if approval.decision == "approve":
            check_approval_meets(plan, requirement_id, approval, humans)
        elif humans is not None:
            # the gateway's signature says the gateway vouches; the people's own proofs say they decided
            check_decision_proofs(approval, humans, "approval")
    except HatpError as exc:
        if exc.rule == "HATP-TXN-20":
            raise
        raise HatpError(
            "HATP-TXN-19",
            f"a human decision in the approval is not proven by its person ({exc.rule}): {exc.reason}",
            path=exc.path,
            code="DECISION_NOT_PROVEN",
            fix="the gateway must return each person's signed decision proof inside the approval",
        ) from exc
    return vote, approval


# The people's shortfalls (hatp_mcp/core/gateway/requirement.py) the coordinator reports as HATP-TXN-20; the rest
# (a missing or failing proof, HATP-GW-19..27 and HATP-GW-32) as HATP-TXN-19.
_SHORTFALLS = frozenset({"HATP-GW-41", "HATP-GW-42", "HATP-GW-43", "HATP-GW-44", "HATP-GW-45", "HATP-GW-46"})


def check_approval_meets(plan: Plan, requirement_id: str, approval: Approval, humans: HumanKeys | None) -> list[str]:
    """HATP-TXN-20: an approving Approval meets the plan's own requirement, decided from the plan, not from the
    gateway's word: routed to the requirement's address, naming the plan's requester (who did not approve), a
    quorum of distinct people (the larger of the approval's and the address's); with `humans` (the organisation's
    cards) each decision proven by its person and each approver named by the address and holding authority for
    the requirement's action over the plan's own total (hatp_mcp.core.gateway.requirement.check_humans_meet, the
    same function the approval gate runs). Returns the approvers.

    Raises HatpError HATP-TXN-20 (code from the shortfall: ROUTED_ELSEWHERE, REQUESTER_MISMATCH,
    SEPARATION_OF_DUTIES, QUORUM_NOT_MET, NOT_AN_APPROVER, AUTHORITY) or the proof's own HatpError (HATP-GW-19..27).
    """
    req = next((r for r in plan.approvals if r.id == requirement_id), None)
    if req is None:
        raise HatpError("HATP-TXN-20", f"no approval requirement {requirement_id!r}", code="BAD_EVIDENCE")
    need = HumanRequirement(
        address=req.address, action=req.action, up_to=plan_money(plan).up_to, requester=plan.requester.principal
    )
    try:
        return check_humans_meet(approval, need, humans, path="approval")
    except HatpError as exc:
        if exc.rule not in _SHORTFALLS:
            raise
        raise HatpError(
            "HATP-TXN-20",
            f"the approval does not meet requirement {requirement_id!r} ({exc.rule}): {exc.reason}",
            path=exc.path,
            code=exc.code,
            fix=exc.fix,
        ) from exc


def check_plan_requester(plan: Plan, plan_digest: str, request: object, agents: AgentKeys, now: datetime) -> str:
    """HATP-TXN-21: the plan's `requester` is proven before the transaction begins: `request` is the AgentRequest
    of the plan's `requester.agent` about this plan digest, signed with a key on its Directory-signed card, and
    that card acts for the plan's `requester.principal`. Returns the principal.

    Raises HatpError HATP-TXN-21 (code REQUESTER_NOT_PROVEN; the reason names HATP-GW-47/48 when the request
    itself fails)."""

    def refuse(reason: str, path: str) -> HatpError:
        return HatpError(
            "HATP-TXN-21",
            reason,
            path=path,
            code="REQUESTER_NOT_PROVEN",
            fix="begin with the agent's signed request about this plan (or through a coordinator holding the agent's "
            "key), naming the agent and the person its Directory-signed card names",
        )

    try:
        principal = verify_request(request, agents, subject="plan", subject_digest=plan_digest, now=now)
    except HatpError as exc:
        raise refuse(f"the plan's requester is not proven ({exc.rule}: {exc.reason})", exc.path) from exc
    agent = request.get("agent") if isinstance(request, Mapping) else getattr(request, "agent", None)
    if agent != plan.requester.agent:
        raise refuse(f"the request is signed by {agent}, the plan names {plan.requester.agent}", "$.requester.agent")
    if principal != plan.requester.principal:
        raise refuse(
            f"{agent} acts for {principal} (its Directory-signed card), the plan names {plan.requester.principal}",
            "$.requester.principal",
        )
    return principal

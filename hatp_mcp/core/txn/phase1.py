"""Phase 1: start, the votes and receipts of prepare and quote, the approvers' answers, and when everything is
in, the decision to commit (or the prepares approval-first sends after the human said yes). A vote or approval
that says no, or evidence that cannot be counted, aborts. Pure: takes the machine's data and `now`, returns
commands; reads no clock, does no IO.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hatp_mcp.core.gateway.terms import same_terms
from hatp_mcp.core.model.amount import with_tolerance
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.evidence import Vote
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.txn.abort import abort, queue_abort
from hatp_mcp.core.txn.commit import decide_commit, next_commit
from hatp_mcp.core.txn.data import Txn, arm, refused
from hatp_mcp.core.txn.deadlines import note_lease, set_deadline
from hatp_mcp.core.txn.events import ApproverReply, Ask, Command, PrepareAnswer, Record, SendPrepare, Step, TxnState
from hatp_mcp.core.txn.evidence_checks import check_approver_answer, check_branch_receipt, check_branch_vote
from hatp_mcp.core.txn.phase2 import start_recovered
from hatp_mcp.core.txn.terms import check_terms, holds_terms, terms_accepted, tighten
from hatp_mcp.errors import HatpError

__all__ = ["on_approver", "on_prepared", "start"]

T = TxnState


def start(t: Txn, now: datetime) -> list[Command]:
    if t.recovering is not None:
        return start_recovered(t, now)
    out: list[Command] = [
        Record(
            event="txn.begin",
            body={
                "mode": t.mode,
                "requested": t.plan.mode,
                "timing": t.timing.wire(),
                "validated": t.validated,
                "humanProofs": "checked" if t.config.humans is not None else "not-checked",
            },
        )
    ]
    quoting = t.mode == "approval-first"
    for b in t.plan.branches:
        quote = quoting and b.tier == "hold"
        out.append(SendPrepare(branch_id=b.branch_id, quote_only=quote))
        t.phase1.inflight.add(b.branch_id)
        if quote:
            t.phase1.quoting.add(b.branch_id)
    t.fire(Step.STARTED_QUOTING if quoting else Step.STARTED_PREPARING)
    if t.mode == "parallel":
        out += _ask(t)
    out += set_deadline(t, now, None, "plan")
    return out


def _ask(t: Txn, terms: ApprovalTerms | None = None) -> list[Command]:
    a = t.approvals
    a.asked = True
    for r in t.plan.approvals:
        a.status[r.id] = "asked"
        if terms is not None:
            a.terms_sent[r.id] = terms
    return [Ask(requirement_id=r.id, terms=terms) for r in t.plan.approvals]


def on_prepared(t: Txn, ev: PrepareAnswer, now: datetime) -> list[Command]:
    p1 = t.phase1
    b = t.branches.get(ev.branch_id)
    if b is None:
        raise HatpError("HATP-TXN-2", f"no branch {ev.branch_id!r} in this plan", code="BAD_EVIDENCE")
    p1.inflight.discard(b.branch_id)
    asked = "quote" if b.branch_id in p1.quoting else "prepare"
    p1.quoting.discard(b.branch_id)
    try:
        vote = check_branch_vote(t.plan, t.plan_digest, b, ev.vote, t.keyring)
        receipt = check_branch_receipt(t.plan, t.plan_digest, b, ev.receipt, t.keyring, {asked})
    except HatpError as exc:
        return [refused(b.branch_id, exc), *_abort_or_note(t, b.branch_id, exc.code, now)]
    if vote.decision == "pending" and t.state is not T.ABORTING:
        return _participant_pending(t, b.branch_id, asked, vote, ev, now)
    out: list[Command] = [
        Record(event="vote", body={"branchId": b.branch_id}, evidence=ev.vote, author=b.participant),
        Record(event="receipt", body={"branchId": b.branch_id}, evidence=ev.receipt, author=b.participant),
    ]
    yes = vote.decision == "yes" and receipt.outcome == "ok"
    if yes and receipt.reported_cost is not None and b.amount is not None:
        bound = with_tolerance(b.amount, b.tolerance_percent)
        if receipt.reported_cost.currency != b.amount.currency or receipt.reported_cost.decimal > bound:
            out.append(
                Record(
                    event="vote.refused",
                    body={"branchId": b.branch_id, "rule": "HATP-TXN-14", "code": "COST_UNDERSTATED"},
                )
            )
            yes = False
    if t.state is T.ABORTING:  # a late answer: whatever it holds is released like the rest
        return out + queue_abort(t, b.branch_id, now)
    if not yes:
        p1.votes[b.branch_id] = "no"
        return out + abort(t, now, vote.code or receipt.code or "VOTED_NO", f"{b.branch_id} voted no")
    if receipt.phase == "quote":
        p1.votes[b.branch_id] = "quoted"
        if receipt.valid_until:
            p1.valid_until[b.branch_id] = parse_ts(receipt.valid_until)
    else:
        p1.votes[b.branch_id] = "yes"
        # as the signed receipt states them (just validated), the same form a replacement reads from the record
        p1.preconditions[b.branch_id] = dict(ev.receipt.get("preconditions") or {})
        out += note_lease(t, b.branch_id, receipt, now)
        if b.branch_id in t.holds.lost:
            t.holds.lost.discard(b.branch_id)
            out.append(Record(event="hold.replaced", body={"branchId": b.branch_id, "askedHumanAgain": False}))
    if t.state is T.COMMITTING:
        t.holds.renewing.discard(b.branch_id)
        return out + next_commit(t, now)
    return out + _advance(t, now)


def _advance(t: Txn, now: datetime) -> list[Command]:
    p1 = t.phase1
    if p1.inflight or t.holds.lost or any(p1.votes.get(b) not in ("yes", "quoted") for b in t.branches):
        return []
    if t.state is T.QUOTING:
        t.fire(Step.ASKED_APPROVERS)
        return _ask(t)
    if t.state is T.PREPARING and t.mode == "holds-first" and not t.approvals.asked:
        t.fire(Step.ASKED_APPROVERS)
        deadline = set_deadline(t, now, None, "holds")  # first: the human is asked under it (MODE-7)
        return [*_ask(t, holds_terms(t)), *deadline]
    if any(t.approvals.status.get(r.id) != "yes" for r in t.plan.approvals):
        if t.state is T.PREPARING and t.approvals.asked:
            t.fire(Step.BRANCHES_VOTED_YES)
        return []
    if t.mode == "approval-first" and any(v == "quoted" for v in p1.votes.values()):
        expiry = min(p1.valid_until.values(), default=None)
        if expiry is None or now > expiry:
            return abort(t, now, "QUOTE_EXPIRED", "the approval came after the quotes expired (HATP-MODE-3)")
        t.fire(Step.APPROVED_QUOTES)
        out: list[Command] = []
        for b, v in p1.votes.items():
            if v == "quoted":
                p1.inflight.add(b)
                out.append(SendPrepare(branch_id=b))
        return out
    return decide_commit(t, now)


def on_approver(t: Txn, ev: ApproverReply, now: datetime) -> list[Command]:
    a = t.approvals
    rid = ev.requirement_id
    if rid not in {r.id for r in t.plan.approvals}:
        raise HatpError("HATP-TXN-3", f"no approval requirement {rid!r} in this plan", code="BAD_EVIDENCE")
    if t.state in (T.ABORTING, T.COMMITTING) or a.status.get(rid) in ("yes", "no"):
        return []
    try:
        vote, approval = check_approver_answer(
            t.plan, t.plan_digest, rid, ev.vote, ev.approval, t.keyring, now, t.config.humans
        )
        incoming = ev.terms
        sent = a.terms_sent.get(rid)
        if incoming is None and approval is not None and sent is not None and same_terms(approval.terms, sent):
            # the gateway signed the terms this coordinator sent into the approval: accepted, though the tighten's
            # own answer is not in (a replacement's poll can answer first, HATP-TXN-22)
            incoming = sent
        if vote.decision == "yes":
            check_terms(t, rid, approval, incoming)  # HATP-MODE-8
    except HatpError as exc:
        return [refused(rid, exc), *abort(t, now, exc.code, exc.reason)]
    gw = vote.voter
    out: list[Command] = terms_accepted(t, rid, incoming) if incoming is not None else []
    if vote.decision == "pending":
        decide_by = parse_ts(vote.decide_by or "")
        if a.status.get(rid) != "pending":
            out.append(Record(event="vote", body={"branchId": rid}, evidence=ev.vote, author=gw))
        a.status[rid] = "pending"
        a.gw_deadline[rid] = decide_by
        out += set_deadline(t, now, decide_by, "approver")
        out += tighten(t, now)  # HATP-MODE-7
        poll_at = now + timedelta(seconds=t.config.poll_seconds)
        return out + arm(t, f"poll:{rid}", poll_at)
    out.append(Record(event="vote", body={"branchId": rid}, evidence=ev.vote, author=gw))
    if ev.approval is not None:
        out.append(Record(event="approval", body={"requirementId": rid}, evidence=ev.approval, author=gw))
    if vote.decision == "no":
        a.status[rid] = "no"
        return out + abort(t, now, "APPROVAL_REJECTED", f"the approver of {rid} said no")
    a.status[rid] = "yes"
    return out + _advance(t, now)


def _participant_pending(t: Txn, bid: str, asked: str, vote: Vote, ev: PrepareAnswer, now: datetime) -> list[Command]:
    """A participant that cannot answer yet: ask again (idempotent) until its signed decideBy (HATP-TXN-16)."""
    p1 = t.phase1
    author = t.branches[bid].participant
    if vote.decide_by is None:
        return [
            Record(event="vote.refused", body={"branchId": bid, "rule": "HATP-TXN-16", "code": "NO_DEADLINE"}),
            *abort(t, now, "NO_DEADLINE", f"{bid} voted pending without a decideBy"),
        ]
    out: list[Command] = []
    if p1.votes.get(bid) != "pending":
        out += [
            Record(event="vote", body={"branchId": bid}, evidence=ev.vote, author=author),
            Record(event="receipt", body={"branchId": bid}, evidence=ev.receipt, author=author),
        ]
    p1.votes[bid] = "pending"
    p1.pending_phase[bid] = asked
    decide_by = parse_ts(vote.decide_by)
    if now >= decide_by:
        timeout = Record(event="vote.timeout", body={"branchId": bid, "decideBy": vote.decide_by})
        # HATP-GW-97: the reason is journaled, so its time has no countdown
        return [*out, timeout, *abort(t, now, "VOTE_TIMEOUT", f"{bid} did not decide by {when_words(vote.decide_by)}")]
    # asked again at the latest at its deadline; still pending then (above) aborts
    return out + arm(t, f"reprepare:{bid}", min(now + timedelta(seconds=t.config.poll_seconds), decide_by))


def _abort_or_note(t: Txn, branch_id: str, code: str, now: datetime) -> list[Command]:
    """Evidence we cannot count: the branch may hold something, so it is released like any other."""
    t.phase1.votes[branch_id] = "unknown"
    if t.state is T.ABORTING:
        return queue_abort(t, branch_id, now)
    return abort(t, now, code, f"{branch_id} sent evidence that cannot be counted")

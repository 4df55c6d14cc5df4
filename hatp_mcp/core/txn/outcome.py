"""Whether a record's outcome is justified by the evidence inside it (HATP-REC-10..16). Pure: no IO, no clock.

A chain that verifies proves only that the coordinator wrote these events in this order. These rules prove the
outcome: a commit decision is preceded by every branch's signed yes vote and ok prepare receipt and, for every
approval requirement, a signed approval that meets it; a COMMITTED record then holds every branch's signed commit
receipt; an ABORTED record names why it aborted and shows nothing was left in place, nor any undo left in doubt
(HATP-TXN-32); a decision that contradicts a recorded vote is refused. The evidence checks are the coordinator's
own (core/txn/evidence_checks.py): a record proves no more than the coordinator was allowed to count, and grows
stronger with those checks.

Two callers run the same rules: `verify_record` (offline, `hatp verify`) and the coordinator runtime, which runs
them before it appends `record.closed` and refuses to close a record they refuse (HATP-REC-17). Grounds that are
the coordinator's own statements (a failed call, a deadline, the agent's request) can justify an abort, never a
commit: aborting is always safe, committing needs the parties' signatures.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.gateway.terms import check_sent_terms
from hatp_mcp.core.model.amount import with_tolerance
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.model.record import DECIDED_EVENT
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.evidence_checks import check_approver_answer, check_branch_receipt, check_branch_vote
from hatp_mcp.core.txn.problem import Problem
from hatp_mcp.core.txn.resume import approving_point
from hatp_mcp.errors import HatpError

__all__ = ["OUTCOMES", "Justification", "justify"]

OUTCOMES = ("COMMITTED", "ABORTED", "NEEDS_RECOVERY")
_WANTS = {"COMMITTED": "commit", "ABORTED": "abort"}
# Coordinator statements recorded before a commit decision that contradict it: each makes the machine abort.
_CONTRADICTS_COMMIT = {
    "vote.refused": "counted a vote as no",
    "approval.timeout": "recorded that the approval deadline passed",
    "vote.timeout": "recorded that a vote's deadline passed",
    "abort.requested": "recorded the agent's request to abort",
}
_PHASE1_CALLS = frozenset({"prepare", "quote", "approval"})


@dataclass(frozen=True, slots=True)
class Justification:
    """What the record says justifies its outcome (`grounds`, plain sentences) and what does not hold."""

    outcome: str
    problems: tuple[Problem, ...]
    grounds: tuple[str, ...]


# Not frozen: one is built for every event each time a record is checked (the coordinator does it at every close,
# HATP-REC-17), a frozen dataclass's __init__ costs more, and nothing here assigns to one.
@dataclass(slots=True)
class _Ev:
    i: int
    name: str
    at: datetime | None
    body: Mapping[str, Any]
    evidence: Mapping[str, Any]
    kind: str | None  # the evidence's `type`
    about: str | None  # the branch or requirement the signed evidence names (never the coordinator-written body)
    signer: str | None  # the kid whose signature over the evidence the caller verified in this check (`justify`)


def _kind(evidence: Mapping[str, Any]) -> str | None:
    kind = evidence.get("type")
    return kind if isinstance(kind, str) else None


def _about(evidence: Mapping[str, Any], kind: str | None) -> str | None:
    got = evidence.get("requirementId") if kind == "hatp.approval" else evidence.get("branchId")
    return got if isinstance(got, str) else None


@dataclass
class _Check:
    plan: Plan
    plan_digest: str
    keyring: Keyring
    humans: HumanKeys | None
    evs: list[_Ev]
    problems: list[Problem] = field(default_factory=list)
    grounds: list[str] = field(default_factory=list)
    # the events by (evidence kind, what it is about) and by name, each in record order: built once, asked often
    by_evidence: dict[tuple[str | None, str | None], list[_Ev]] = field(default_factory=dict)
    by_name: dict[str, list[_Ev]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for e in self.evs:
            self.by_evidence.setdefault((e.kind, e.about), []).append(e)
            self.by_name.setdefault(e.name, []).append(e)

    def fail(self, index: int, rule: str, reason: str) -> None:
        self.problems.append(Problem(index, rule, reason))

    def signed(self, kind: str, about: str, lo: int = -1, hi: int | None = None) -> list[_Ev]:
        """The events carrying evidence of `kind` about branch or requirement `about`, strictly between lo and hi."""
        top = sys.maxsize if hi is None else hi
        return [e for e in self.by_evidence.get((kind, about), ()) if lo < e.i < top]

    def said(self, name: str, lo: int = -1, hi: int | None = None) -> list[_Ev]:
        """The events named `name`, strictly between lo and hi."""
        top = sys.maxsize if hi is None else hi
        return [e for e in self.by_name.get(name, ()) if lo < e.i < top]

    def receipt_ok(self, b: Branch, e: _Ev, phase: str) -> bool:
        """The receipt is the branch participant's, for `phase`, outcome ok (HATP-TXN-2)."""
        try:
            receipt = check_branch_receipt(self.plan, self.plan_digest, b, e.evidence, self.keyring, {phase}, e.signer)
            return receipt.outcome == "ok"
        except HatpError:
            return False


def _events(events: Sequence[Any], verified: Mapping[int, str]) -> list[_Ev]:
    out = []
    times: dict[str, datetime | None] = {}  # the events of one batch share their `at`: parsed once
    # `type(x) is dict` first: a plain dict is a Mapping, and the ABC check costs more than the test
    for i, raw in enumerate(events):
        if not (type(raw) is dict or isinstance(raw, Mapping)) or raw.get("event") == "record.closed":
            continue
        stamp = raw.get("at")
        at: datetime | None = None
        if isinstance(stamp, str):
            if stamp in times:
                at = times[stamp]
            else:
                try:
                    at = parse_ts(stamp)
                except ValueError:
                    at = None
                times[stamp] = at
        body = raw.get("body")
        evidence = raw.get("evidence")
        held = evidence if type(evidence) is dict or isinstance(evidence, Mapping) else {}
        said = body if type(body) is dict or isinstance(body, Mapping) else {}
        kind = _kind(held)
        out.append(_Ev(i, str(raw.get("event")), at, said, held, kind, _about(held, kind), verified.get(i)))
    return out


def justify(
    plan: Plan,
    plan_digest: str,
    events: Sequence[Any],
    outcome: object,
    keyring: Keyring,
    humans: HumanKeys | None = None,
    *,
    close_index: int | None = None,
    verified: Mapping[int, str] | None = None,
) -> Justification:
    """Check that `events` (a record's events, its `record.closed` excluded or ignored) justify `outcome`.

    `close_index`: the index of the `record.closed` event (default: just after the last event), where problems
    about the outcome as a whole are reported. `humans`: the keys on the organisation's cards; with them an
    approval counts only when its decisions are proven by their people (HATP-TXN-19). `verified`: event index ->
    the kid whose signature over that event's evidence the caller has verified in the same check, as it stands in
    `events` (check_record's chain pass verifies every piece of evidence): those are not verified again, their
    roles and parties still checked here. Never raises."""
    where = len(events) if close_index is None else close_index
    c = _Check(plan, plan_digest, keyring, humans, _events(events, verified or {}))
    if outcome not in OUTCOMES:
        c.fail(where, "HATP-REC-10", f"outcome {outcome!r} is not one of {', '.join(OUTCOMES)}")
        return Justification(str(outcome), tuple(c.problems), ())
    decisions = c.said("decision")
    if not decisions:
        c.fail(where, "HATP-REC-10", f"the record holds no decision, yet closes {outcome}: nothing was decided")
        return Justification(str(outcome), tuple(c.problems), ())
    for d in decisions:
        if d.body.get("decision") not in ("commit", "abort"):
            c.fail(d.i, "HATP-REC-10", f"decision {d.body.get('decision')!r} is neither commit nor abort")
    commits = [d for d in decisions if d.body.get("decision") == "commit"]
    aborts = [d for d in decisions if d.body.get("decision") == "abort"]
    if len(commits) > 1:
        c.fail(commits[1].i, "HATP-REC-10", f"commit is decided again (first at event {commits[0].i})")
    if aborts and decisions[-1].i != aborts[0].i:
        later = next(d for d in decisions if d.i > aborts[0].i)
        c.fail(later.i, "HATP-REC-10", f"a decision follows the abort decided at event {aborts[0].i}: abort is final")
    last = decisions[-1].body.get("decision")
    want = _WANTS.get(str(outcome))
    if want is not None and last != want:
        c.fail(where, "HATP-REC-10", f"the record closes {outcome}, but its last decision is {last!r}")
    commit = commits[0] if commits else None
    abort = aborts[0] if aborts else None
    if commit is not None:
        _commit_justified(c, commit)
    if abort is not None:
        _abort_grounds(c, abort, after=commit.i if commit is not None and commit.i < abort.i else -1)
    _answered(c, commit, str(outcome), where)
    if outcome == "COMMITTED" and commit is not None:
        _all_committed(c, commit, where)
    elif outcome == "ABORTED" and abort is not None:
        _nothing_left(c, abort, where)
        _no_undo_in_doubt(c, where)
    elif outcome == "NEEDS_RECOVERY":
        _left_to_recover(c, where)
    return Justification(str(outcome), tuple(c.problems), tuple(c.grounds))


def _commit_justified(c: _Check, d: _Ev) -> None:
    """HATP-REC-11 (every voter said yes, with valid evidence, before the decision) and HATP-REC-12 (nothing
    recorded before it contradicts it)."""
    plan = c.plan
    yes = 0
    for b in plan.branches:
        bid = b.branch_id
        votes = c.signed("hatp.vote", bid, hi=d.i)
        no = next((v for v in votes if v.evidence.get("decision") == "no"), None)
        if no is not None:
            c.fail(d.i, "HATP-REC-12", f"commit was decided after {bid} voted no at event {no.i}")
            continue
        if not votes:
            c.fail(d.i, "HATP-REC-11", f"commit was decided without a vote of {bid}'s participant before it")
            continue
        try:
            vote = check_branch_vote(plan, c.plan_digest, b, votes[-1].evidence, c.keyring, votes[-1].signer)
        except HatpError as exc:
            c.fail(d.i, "HATP-REC-11", f"{bid}'s vote at event {votes[-1].i} does not count: {exc.rule}: {exc.reason}")
            continue
        if vote.decision != "yes":
            c.fail(d.i, "HATP-REC-11", f"commit was decided while {bid}'s last vote is {vote.decision!r}")
            continue
        receipts = [e for e in c.signed("hatp.receipt", bid, hi=d.i) if e.evidence.get("phase") in ("prepare", "quote")]
        if not receipts or receipts[-1].evidence.get("phase") != "prepare":
            c.fail(d.i, "HATP-REC-11", f"commit was decided without {bid}'s prepare receipt before it")
            continue
        try:
            last = receipts[-1]
            receipt = check_branch_receipt(plan, c.plan_digest, b, last.evidence, c.keyring, {"prepare"}, last.signer)
        except HatpError as exc:
            c.fail(
                d.i, "HATP-REC-11", f"{bid}'s prepare receipt at event {receipts[-1].i} does not count: {exc.reason}"
            )
            continue
        if receipt.outcome != "ok":
            c.fail(d.i, "HATP-REC-12", f"commit was decided after {bid}'s prepare was {receipt.outcome}")
        elif receipt.reported_cost is not None and b.amount is not None:
            bound = with_tolerance(b.amount, b.tolerance_percent)
            if receipt.reported_cost.currency != b.amount.currency or receipt.reported_cost.decimal > bound:
                c.fail(
                    d.i,
                    "HATP-REC-12",
                    f"commit was decided although {bid} reports a cost of {receipt.reported_cost.value} "
                    f"{receipt.reported_cost.currency} above its bound: that yes counts as no (HATP-TXN-14)",
                )
            else:
                yes += 1
        else:
            yes += 1
    for r in plan.approvals:
        votes = c.signed("hatp.vote", r.id, hi=d.i)
        no = next((v for v in votes if v.evidence.get("decision") == "no"), None)
        if no is not None:
            c.fail(d.i, "HATP-REC-12", f"commit was decided after the approver of {r.id} said no at event {no.i}")
            continue
        if not votes:
            c.fail(d.i, "HATP-REC-11", f"commit was decided without an answer to approval requirement {r.id!r}")
            continue
        approvals = c.signed("hatp.approval", r.id, hi=d.i)
        try:
            vote, approval = check_approver_answer(
                plan,
                c.plan_digest,
                r.id,
                votes[-1].evidence,
                approvals[-1].evidence if approvals else None,
                c.keyring,
                d.at,
                c.humans,
                (votes[-1].signer, approvals[-1].signer if approvals else None),
            )
        except HatpError as exc:
            c.fail(d.i, "HATP-REC-11", f"the approval of {r.id!r} does not meet it: {exc.rule}: {exc.reason}")
            continue
        if vote.decision != "yes" or approval is None:
            c.fail(d.i, "HATP-REC-11", f"commit was decided while the approver of {r.id!r} answered {vote.decision!r}")
            continue
        terms = _terms_problem(c, r.id, d.i, approval)
        if terms is not None:
            c.fail(d.i, "HATP-REC-11", f"the approval of {r.id!r} does not meet it: HATP-MODE-8: {terms}")
            continue
        people = sorted({x.approver for x in approval.decisions if x.decision == "approve"})
        c.grounds.append(
            f"approval {r.id} met: {len(people)} of {approval.quorum.required} required ({', '.join(people)})"
        )
    for e in c.evs:
        if e.i >= d.i:
            break
        why = _CONTRADICTS_COMMIT.get(e.name)
        if e.name == "call.failed" and e.body.get("phase") in _PHASE1_CALLS:
            why = f"recorded that {e.body.get('branchId')}'s {e.body.get('phase')} call failed"
        if e.name == "coordinator.recovered" and e.body.get("decision") in ("presumed-abort", "none"):
            why = "presumed abort (a replacement found no decision)"
        if why is not None:
            c.fail(d.i, "HATP-REC-12", f"commit was decided after the coordinator {why} at event {e.i}")
        if e.name == "coordinator.recovered" and e.body.get("decision") == "resumed":
            _resumed_on_grounds(c, e)
    if yes == len(plan.branches):
        c.grounds.insert(0, f"every branch voted yes: {yes} signed votes and prepare receipts before the decision")


def _resumed_on_grounds(c: _Check, resumed: _Ev) -> None:
    """HATP-TXN-24: a replacement that took up the approving phase did so on a record that waited only for a human
    (hatp_mcp.core.txn.resume.approving_point, read from the events before it); otherwise it should have presumed
    abort, and a commit decided after it is not justified."""
    before = [{"event": e.name, "body": e.body, "evidence": e.evidence} for e in c.evs if e.i < resumed.i]
    found = approving_point(c.plan, before)
    if isinstance(found, str):
        c.fail(resumed.i, "HATP-TXN-24", f"a replacement resumed the approving phase at event {resumed.i}: {found}")


def _terms_problem(c: _Check, rid: str, before: int, approval: Any) -> str | None:
    """HATP-MODE-8 as the record states it: an approving Approval carries exactly the terms the gateway accepted
    (the last `approval.terms` event before the decision; none without one), in holds-first with the holds."""
    accepted: ApprovalTerms | None = None
    for e in c.said("approval.terms", hi=before):
        if e.body.get("requirementId") == rid and isinstance(e.body.get("terms"), Mapping):
            try:
                accepted = ApprovalTerms.model_validate(dict(e.body["terms"]))
            except ValueError:
                return f"the approval.terms event at {e.i} is not approval terms"
    try:
        check_sent_terms(approval, accepted)
    except HatpError as exc:
        return exc.reason
    begun = c.said("txn.begin")
    holds_first = bool(begun) and begun[0].body.get("mode") == "holds-first"
    if holds_first and (accepted is None or not accepted.holds) and any(b.tier == "hold" for b in c.plan.branches):
        return "holds-first: the approval does not carry the holds' end times the person approved under"
    return None


def _answered(c: _Check, commit: _Ev | None, outcome: str, where: int) -> None:
    """HATP-TXN-29: an `outcome.decided` (the agent told COMMITTED before the close, HATP-TXN-25) is recorded once,
    after the commit decision and an irreversible branch's signed ok commit receipt, and the record never closes
    ABORTED after it (HATP-TXN-26)."""
    told = c.said(DECIDED_EVENT)
    for again in told[1:]:
        c.fail(again.i, "HATP-TXN-29", f"the outcome is told again (first at event {told[0].i})")
    if not told:
        return
    e = told[0]
    if e.body.get("outcome") != "COMMITTED":
        c.fail(e.i, "HATP-TXN-29", f"the agent is told {e.body.get('outcome')!r} before the close: only COMMITTED is")
    if commit is None or commit.i > e.i:
        c.fail(e.i, "HATP-TXN-29", "the agent is told COMMITTED before commit was decided")
    irreversible = [b for b in c.plan.branches if b.tier in ("final", "hold")]
    if not any(
        c.receipt_ok(b, r, "commit") for b in irreversible for r in c.signed("hatp.receipt", b.branch_id, hi=e.i)
    ):
        c.fail(e.i, "HATP-TXN-29", "the agent is told COMMITTED before an irreversible branch's commit receipt")
    if outcome == "ABORTED":  # HATP-TXN-29: never contradicted
        c.fail(where, "HATP-TXN-29", f"the record closes ABORTED after telling the agent COMMITTED at event {e.i}")


def _all_committed(c: _Check, d: _Ev, where: int) -> None:
    """HATP-REC-13: after the commit decision, every branch's signed commit receipt says ok; none was undone."""
    ok = 0
    for b in c.plan.branches:
        commits = [e for e in c.signed("hatp.receipt", b.branch_id, lo=d.i) if e.evidence.get("phase") == "commit"]
        if not commits:
            c.fail(where, "HATP-REC-13", f"the record closes COMMITTED without {b.branch_id}'s commit receipt")
            continue
        if not any(c.receipt_ok(b, e, "commit") for e in commits):
            c.fail(where, "HATP-REC-13", f"no commit receipt of {b.branch_id} is its participant's signed ok")
            continue
        undone = [
            e
            for e in c.signed("hatp.receipt", b.branch_id, lo=d.i)
            if e.evidence.get("phase") in ("abort", "compensate") and e.evidence.get("outcome") == "ok"
        ]
        if undone:
            c.fail(
                where,
                "HATP-REC-13",
                f"the record closes COMMITTED, but {b.branch_id} was undone at event {undone[0].i}",
            )
            continue
        ok += 1
    if ok == len(c.plan.branches):
        c.grounds.append(f"every branch committed: {ok} signed commit receipts")


def _abort_grounds(c: _Check, d: _Ev, after: int) -> None:
    """HATP-REC-14: the abort names its reason, recorded after the previous decision and before this one."""
    found: list[str] = []
    branches = {b.branch_id: b for b in c.plan.branches}
    requirements = {r.id for r in c.plan.approvals}
    for e in c.evs:
        if e.i <= after:
            continue
        if e.i >= d.i:
            break
        found += _ground(c, e, d, branches, requirements)
    if not found:
        c.fail(
            d.i,
            "HATP-REC-14",
            "abort was decided without a reason in the record: no no-vote, refusal, failed call, deadline, "
            "request of the agent or failed commit precedes it",
        )
        return
    c.grounds.append("aborted because " + "; ".join(dict.fromkeys(found)))


def _ground(c: _Check, e: _Ev, d: _Ev, branches: Mapping[str, Branch], requirements: set[str]) -> list[str]:
    """What one event says that justifies the abort decided at `d` (empty: nothing)."""
    about = e.about or ""
    kind = e.kind
    if kind == "hatp.vote" and e.evidence.get("decision") == "no":
        code = e.evidence.get("code")
        if about in branches:
            try:
                check_branch_vote(c.plan, c.plan_digest, branches[about], e.evidence, c.keyring, e.signer)
            except HatpError:
                return []
            return [f"{about} voted no{f' ({code})' if code else ''}, signed by {e.evidence.get('voter')}"]
        if about in requirements:
            try:
                approval = c.signed("hatp.approval", about, hi=d.i)
                raw, signer = (approval[-1].evidence, approval[-1].signer) if approval else (None, None)
                check_approver_answer(
                    c.plan, c.plan_digest, about, e.evidence, raw, c.keyring, None, c.humans, (e.signer, signer)
                )
            except HatpError:
                return []
            return [f"the approver of {about} said no, signed by {e.evidence.get('voter')}"]
    if kind == "hatp.vote" and e.evidence.get("decision") == "pending" and isinstance(e.evidence.get("decideBy"), str):
        if d.at is not None and _before(e.evidence["decideBy"], d.at):
            return [f"{about}'s signed deadline {e.evidence['decideBy']} had passed"]
    if kind == "hatp.receipt" and about in branches:
        phase = e.evidence.get("phase")
        if e.evidence.get("outcome") == "refused" and phase in ("prepare", "quote", "commit"):
            try:
                check_branch_receipt(
                    c.plan, c.plan_digest, branches[about], e.evidence, c.keyring, {str(phase)}, e.signer
                )
            except HatpError:
                return []
            code = e.evidence.get("code")
            return [f"{about} refused its {phase}{f' ({code})' if code else ''}"]
        until = e.evidence.get("validUntil")
        if phase == "quote" and isinstance(until, str) and d.at is not None and _before(until, d.at):
            return [f"{about}'s quote expired at {until}"]
    body = e.body
    if e.name == "evidence.refused":
        return [f"the coordinator refused {body.get('branchId')}'s evidence ({body.get('rule')} {body.get('code')})"]
    if e.name == "vote.refused":
        return [f"the coordinator counted {body.get('branchId')}'s vote as no ({body.get('rule')} {body.get('code')})"]
    if e.name == "call.failed" and body.get("phase") in _PHASE1_CALLS:
        return [f"{body.get('branchId')}'s {body.get('phase')} call failed"]
    if e.name in ("approval.timeout", "vote.timeout"):
        return [f"the deadline {body.get('decideBy')} passed"]
    if e.name == "approval.deadline" and isinstance(body.get("decideBy"), str) and d.at is not None:
        if _before(body["decideBy"], d.at, inclusive=True):
            return [f"the approval deadline {body['decideBy']} had passed"]
    if e.name == "abort.requested":
        return [f"the agent {body.get('by')} asked to abort ({body.get('reason') or 'no reason given'})"]
    if e.name == "coordinator.recovered" and body.get("decision") in ("presumed-abort", "none"):
        return ["a replacement coordinator found no decision logged (presumed abort)"]
    return []


def _before(ts: str, at: datetime, *, inclusive: bool = False) -> bool:
    try:
        t = parse_ts(ts)
    except ValueError:
        return False
    return t <= at if inclusive else t < at


def _nothing_left(c: _Check, d: _Ev, where: int) -> None:
    """HATP-REC-15: an ABORTED record left nothing in place: no branch committed that was not compensated, and
    every branch whose participant's last signed vote was yes or pending was released after the decision."""
    released = 0
    for b in c.plan.branches:
        bid = b.branch_id
        receipts = c.signed("hatp.receipt", bid)
        committed = [e for e in receipts if e.evidence.get("phase") == "commit" and c.receipt_ok(b, e, "commit")]
        if committed:
            undone = [e for e in receipts if e.i > committed[0].i and e.evidence.get("phase") == "compensate"]
            if b.tier != "compensate":
                c.fail(where, "HATP-REC-15", f"{bid} ({b.tier}) committed at event {committed[0].i} and is not undone")
            elif not any(c.receipt_ok(b, e, "compensate") for e in undone):
                c.fail(where, "HATP-REC-15", f"{bid} committed at event {committed[0].i} and was never compensated")
            else:
                released += 1
            continue
        votes = c.signed("hatp.vote", bid)
        if not votes or votes[-1].evidence.get("decision") not in ("yes", "pending"):
            continue
        aborts = [e for e in receipts if e.i > d.i and e.evidence.get("phase") == "abort"]
        if not any(c.receipt_ok(b, e, "abort") for e in aborts):
            c.fail(where, "HATP-REC-15", f"{bid} voted {votes[-1].evidence.get('decision')} and was never released")
        else:
            released += 1
    c.grounds.append(f"nothing left in place: {released} branch(es) released or undone, with signed receipts")


_UNDO = ("abort", "compensate")


def _no_undo_in_doubt(c: _Check, where: int) -> None:
    """HATP-TXN-32: an ABORTED record holds no undo that stayed in doubt: after a branch's last in-doubt abort or
    compensate receipt, or the coordinator's `undo.in-doubt`, comes that participant's signed ok of the undo. An
    undo in doubt may not have happened, so ABORTED would say more than the record shows (HATP-TXN-31: it closes
    NEEDS_RECOVERY)."""
    for b in c.plan.branches:
        bid = b.branch_id
        undos = [e for e in c.signed("hatp.receipt", bid) if e.evidence.get("phase") in _UNDO]
        doubts = [e for e in undos if e.evidence.get("outcome") == "in-doubt"]
        doubts += [e for e in c.said("undo.in-doubt") if e.body.get("branchId") == bid]
        if not doubts:
            continue
        last = max(doubts, key=lambda e: e.i)
        if not any(c.receipt_ok(b, e, str(e.evidence.get("phase"))) for e in undos if e.i > last.i):
            c.fail(
                where,
                "HATP-TXN-32",
                f"the record closes ABORTED, but {bid}'s undo is in doubt since event {last.i} and no signed ok "
                "of it follows: it may not have happened (close NEEDS_RECOVERY and offer it for recovery)",
            )


def _left_to_recover(c: _Check, where: int) -> None:
    """HATP-REC-16: a NEEDS_RECOVERY record names what is left: a lapsed hold, an offered recovery, an undo or a
    commit after the final step that was refused."""
    left = [e.name for e in c.evs if e.name in ("hold.lapsed", "recovery.offered")]
    left += [
        f"{e.about} {e.evidence.get('phase')} {e.evidence.get('outcome')}"
        for e in c.evs
        if e.kind == "hatp.receipt"
        and e.evidence.get("phase") in ("abort", "compensate", "commit")
        and e.evidence.get("outcome") != "ok"
    ]
    if not left:
        c.fail(where, "HATP-REC-16", "the record closes NEEDS_RECOVERY but names nothing left to recover")
        return
    c.grounds.append("left to recover: " + ", ".join(dict.fromkeys(left)))

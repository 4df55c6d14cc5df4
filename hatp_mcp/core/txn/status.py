"""What a coordinator says about one transaction, read from its durable log: `summarize(...) -> TxnStatus`.

The state is derived from the record events and the latest decision, never from a connection or a running task,
so a restarted coordinator answers the same as the one that began the transaction: closed records give their
outcome, a commit decision is `committing` (or `in-doubt` while a commit has no answer), an abort decision is
`aborting`, and an undecided transaction is `quoting`, `preparing` or `approving`. The outcome is said as soon as
the record says it can no longer change (`outcome.decided`, before the holds' commits answer) with the holds
still being confirmed, and `closed` once the record is. A closed transaction's status
also says, from its record alone, what became of each branch, the first refusal and every refusal, the decision's
reason, and the digest of the whole record (so an agent needs the record itself only to verify it). An undecided
one says which approvals it waits for, by when (the gateway's signed pending vote) and, from the gateway's words,
who must act and where. Pure: no IO, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from hatp_mcp.core.model.gateway_messages import AskWaiting
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.record import CLOSE_EVENT, DECIDED_EVENT
from hatp_mcp.core.model.txn_api import BranchOutcome, FirstRefusal, TxnStatus, VoteSummary, WaitingOn
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.canonical import digest

__all__ = ["decided", "derive_state", "first_refusal", "refusals", "results", "summarize", "waiting_on"]

_ENDS = {"COMMITTED": "committed", "ABORTED": "aborted", "NEEDS_RECOVERY": "needs-recovery"}


def _votes(events: Sequence[Mapping[str, Any]]) -> dict[str, VoteSummary]:
    latest: dict[str, VoteSummary] = {}
    for ev in events:
        evidence = ev.get("evidence")
        if ev.get("event") != "vote" or not isinstance(evidence, Mapping):
            continue
        branch = str((ev.get("body") or {}).get("branchId") or evidence.get("branchId"))
        latest[branch] = VoteSummary(
            branch_id=branch, voter=str(evidence.get("voter", "")), decision=str(evidence.get("decision", "no"))
        )
    return latest


def _in_doubt(events: Sequence[Mapping[str, Any]]) -> bool:
    """A commit timed out (commit.in-doubt) and no commit receipt for that branch came after it."""
    doubtful: set[str] = set()
    for ev in events:
        branch = (ev.get("body") or {}).get("branchId")
        if ev.get("event") == "commit.in-doubt":
            doubtful.add(str(branch))
        elif ev.get("event") == "commit":
            doubtful.discard(str(branch))
    return bool(doubtful)


def _branch_of(ev: Mapping[str, Any]) -> str | None:
    body = ev.get("body") or {}
    evidence = ev.get("evidence") or {}
    found = body.get("branchId") or body.get("requirementId") or evidence.get("branchId")
    return str(found) if found else None


def refusals(events: Sequence[Mapping[str, Any]]) -> list[FirstRefusal]:
    """HATP-MCP-55: every branch or approver that refused, the first no vote or refused receipt of each, in record
    order, with its code and its own reason (a person's reject: the words their signed decision carries,
    HATP-GW-87)."""
    out: list[FirstRefusal] = []
    for ev in events:
        evidence = ev.get("evidence")
        branch = _branch_of(ev)
        if not isinstance(evidence, Mapping) or branch is None or any(r.branch_id == branch for r in out):
            continue
        if evidence.get("decision") == "no" or evidence.get("outcome") == "refused":
            code, reason = evidence.get("code"), evidence.get("reason")
            out.append(
                FirstRefusal(
                    branch_id=branch,
                    event=str(ev.get("event")),
                    code=str(code)[:64] if code is not None else None,
                    reason=str(reason)[:2000] if reason is not None else None,
                )
            )
    return out


def first_refusal(events: Sequence[Mapping[str, Any]]) -> FirstRefusal | None:
    """The first no vote or refused receipt in the record, with its code and its own reason."""
    found = refusals(events)
    return found[0] if found else None


def waiting_on(
    plan: Plan,
    events: Sequence[Mapping[str, Any]],
    asked: Mapping[str, AskWaiting] | None = None,
    now: datetime | None = None,
) -> list[WaitingOn]:
    """HATP-MCP-54: the approval requirements whose latest vote is the gateway's signed pending, in plan order,
    with that vote's `decideBy` (in words too, "in N min" from `now`, HATP-GW-96) and, from `asked` (the gateway's
    latest words, by requirement id), who must act and the inbox link."""
    pending: dict[str, str | None] = {}
    for ev in events:
        evidence = ev.get("evidence")
        if ev.get("event") != "vote" or not isinstance(evidence, Mapping):
            continue
        branch = str((ev.get("body") or {}).get("branchId") or evidence.get("branchId"))
        if evidence.get("decision") == "pending":
            by = evidence.get("decideBy")
            pending[branch] = str(by) if by is not None else None
        else:
            pending.pop(branch, None)
    out = []
    for req in plan.approvals:
        if req.id not in pending:
            continue
        words = (asked or {}).get(req.id)
        by, said = pending[req.id], None
        if by is not None:  # HATP-GW-96: the deadline as the agent tells its user, from the coordinator's clock
            said = when_words(by, now)
        out.append(
            WaitingOn(
                requirement_id=req.id,
                decide_by=by,
                decide_by_words=said,
                people=list(words.people) if words is not None else [],
                link=words.link if words is not None else None,
            )
        )
    return out


_PHASE2 = {
    "commit": "committed",
    "compensate": "undone",
    "commit.in-doubt": "in-doubt",
    "undo.in-doubt": "in-doubt",  # HATP-TXN-31: the coordinator stopped sending an undo it could not settle
}


def results(plan: Plan, events: Sequence[Mapping[str, Any]]) -> list[BranchOutcome]:
    """What became of each branch and approval requirement, in plan order, from the record's events: the last
    phase-2 answer (commit, abort, compensate), else its vote."""
    tiers = {b.branch_id: b.tier for b in plan.branches}
    last: dict[str, tuple[str, str | None]] = {}
    for ev in events:
        name, evidence, branch = str(ev.get("event")), ev.get("evidence"), _branch_of(ev)
        if branch is None:
            continue
        evidence = evidence if isinstance(evidence, Mapping) else {}
        code = evidence.get("code")
        code = str(code)[:64] if code is not None else None
        if name == "approval":
            last[branch] = ("approved" if evidence.get("decision") == "approve" else "rejected", code)
        elif name == "vote" and (branch not in last or last[branch][0] in ("voted", "refused")):
            decision = evidence.get("decision")
            last[branch] = ("refused" if decision == "no" else "voted", code)
        elif name == "receipt" and evidence.get("outcome") == "refused":
            last[branch] = ("refused", code)
        elif name in _PHASE2 or name == "abort":
            if evidence.get("outcome") == "refused":
                last[branch] = ("refused", code)
            elif evidence.get("outcome") == "in-doubt":  # never "released" or "undone" for what may not have been
                last[branch] = ("in-doubt", code)
            elif name == "abort":
                last[branch] = ("released" if tiers.get(branch) == "hold" else "not-committed", code)
            else:
                last[branch] = (_PHASE2[name], code)
    ids = [*(b.branch_id for b in plan.branches), *(a.id for a in plan.approvals)]
    out = []
    for branch_id in ids:
        result, code = last.get(branch_id, ("no-answer", None))
        if result == "voted":  # a yes vote with no phase-2 answer after it
            result = "no-answer"
        out.append(BranchOutcome(branch_id=branch_id, result=result, code=code))
    return out


def _decision_reason(events: Sequence[Mapping[str, Any]]) -> str | None:
    for ev in reversed(events):
        if ev.get("event") == "decision":
            reason = (ev.get("body") or {}).get("reason")
            return str(reason)[:2000] if reason is not None else None
    return None


def decided(events: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]] | None:
    """HATP-MCP-65: the outcome the record says can no longer change, and the branches still being confirmed:
    from `record.closed` (nothing left to confirm) or, before it, from `outcome.decided` (HATP-TXN-25) less the
    branches whose commit has answered ok since. None while the outcome is open."""
    if events and events[-1].get("event") == CLOSE_EVENT:
        return str((events[-1].get("body") or {}).get("outcome")), []
    told: tuple[str, list[str]] | None = None
    done: set[str] = set()
    for ev in events:
        name = ev.get("event")
        if name == DECIDED_EVENT and told is None:  # HATP-MCP-65: told before the close
            body = ev.get("body") or {}
            told = str(body.get("outcome")), [str(b) for b in body.get("confirming") or []]
        elif name == "commit" and (ev.get("evidence") or {}).get("outcome") == "ok":
            done.add(str((ev.get("body") or {}).get("branchId")))
    if told is None:
        return None
    return told[0], [b for b in told[1] if b not in done]


def derive_state(
    plan: Plan, events: Sequence[Mapping[str, Any]], decision: str | None, votes: Mapping[str, VoteSummary]
) -> str:
    if events and events[-1].get("event") == CLOSE_EVENT:
        outcome = str((events[-1].get("body") or {}).get("outcome"))
        return _ENDS.get(outcome, "needs-recovery")
    if decision == "commit":
        return "in-doubt" if _in_doubt(events) else "committing"
    if decision == "abort":
        return "aborting"
    if not events:
        return "new"
    mode = (events[0].get("body") or {}).get("mode")
    branches = {b.branch_id for b in plan.branches}
    if not branches <= set(votes):
        return "quoting" if mode == "approval-first" else "preparing"
    return "approving"


def summarize(
    plan: Plan,
    events: Sequence[Mapping[str, Any]],
    decision: str | None,
    record: Mapping[str, Any] | None = None,
    plan_digest: str | None = None,
    asked: Mapping[str, AskWaiting] | None = None,
    now: datetime | None = None,
) -> TxnStatus:
    """The status of `plan`'s transaction given its logged record `events` and latest `decision`.

    `record` (the whole Transaction Record) is included only when the events end in record.closed; `plan_digest`,
    the plan's digest when the caller has it (else computed); `asked`, the gateway's latest words on who each open
    approval waits for (shown only while no decision is made); `now`, the coordinator's clock, for how far each
    open approval's deadline is (HATP-GW-96).
    """
    votes = _votes(events)
    state = derive_state(plan, events, decision, votes)
    closed = bool(events) and events[-1].get("event") == CLOSE_EVENT
    told = decided(events)
    outcome, confirming = told if told is not None else (None, [])
    return TxnStatus(
        txn_id=plan.txn_id,
        plan_digest=plan_digest if plan_digest is not None else plan.digest(),
        state=state,  # type: ignore[arg-type]
        decision=decision if decision in ("commit", "abort") else None,  # type: ignore[arg-type]
        outcome=outcome if outcome in _ENDS else None,  # type: ignore[arg-type]
        closed=closed,
        confirming=confirming,
        votes=list(votes.values()),
        event_count=len(events),
        results=results(plan, events) if closed else [],
        first_refusal=first_refusal(events) if closed else None,
        refusals=refusals(events) if closed else [],
        waiting_on=waiting_on(plan, events, asked, now) if decision is None and not closed else [],
        decision_reason=_decision_reason(events) if closed else None,
        record_digest=digest(dict(record)) if closed and record is not None else None,
        record=dict(record) if closed and record is not None else None,
    )

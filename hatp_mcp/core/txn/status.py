"""What a coordinator says about one transaction, read from its durable log: `summarize(...) -> TxnStatus`.

The state is derived from the record events and the latest decision, never from a connection or a running task,
so a restarted coordinator answers the same as the one that began the transaction: closed records give their
outcome, a commit decision is `committing` (or `in-doubt` while a commit has no answer), an abort decision is
`aborting`, and an undecided transaction is `quoting`, `preparing` or `approving`. Pure: no IO, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.record import CLOSE_EVENT
from hatp_mcp.core.model.txn_api import TxnStatus, VoteSummary

__all__ = ["derive_state", "summarize"]

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
) -> TxnStatus:
    """The status of `plan`'s transaction given its logged record `events` and latest `decision`.

    `record` (the whole Transaction Record) is included only when the events end in record.closed; `plan_digest`,
    the plan's digest when the caller has it (else computed).
    """
    votes = _votes(events)
    state = derive_state(plan, events, decision, votes)
    closed = bool(events) and events[-1].get("event") == CLOSE_EVENT
    outcome = str((events[-1].get("body") or {}).get("outcome")) if closed else None
    return TxnStatus(
        txn_id=plan.txn_id,
        plan_digest=plan_digest if plan_digest is not None else plan.digest(),
        state=state,  # type: ignore[arg-type]
        decision=decision if decision in ("commit", "abort") else None,  # type: ignore[arg-type]
        outcome=outcome if outcome in _ENDS else None,  # type: ignore[arg-type]
        votes=list(votes.values()),
        event_count=len(events),
        record=dict(record) if closed and record is not None else None,
    )

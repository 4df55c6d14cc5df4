"""The coordinator machine's data, grouped by what it describes, and its configuration.

`Txn` is one transaction as the machine knows it: the fixed facts (plan, mode, keys, configuration), the state,
and what changes, in five groups: the phase-1 votes, the holds' leases and horizons, the approvals, the phase-2
progress, and the armed timers. The phase functions (phase1, phase2, deadlines, terms, abort, commit, timers) take
it explicitly and name each step that moves it (`fire`); the state it moves to is decided by the transition
function hatp_mcp.core.txn.machine hands in, from its table. The machine owns it and restores a `snapshot` when an
event fails. Pure data: no IO, no clock, no protocol logic beyond arming a timer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.model.plan import Branch, Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.events import Arm, Command, Record, Step, TxnState
from hatp_mcp.core.txn.timing import Timing, commit_order
from hatp_mcp.errors import HatpError

__all__ = [
    "Approvals",
    "Approving",
    "Config",
    "Holds",
    "Progress",
    "Snapshot",
    "Transition",
    "Txn",
    "Votes",
    "arm",
    "refused",
]

Transition = Callable[[TxnState, Step], TxnState]


@dataclass(frozen=True, slots=True)
class Config:
    coordinator: str = "coordinator://localhost"
    # The keys on the organisation's Directory-signed cards. With them, every human decision in an approval must
    # carry that person's own proof (HATP-TXN-19); without them the record says the proofs were not checked.
    humans: HumanKeys | None = None
    poll_seconds: int = 30  # how often a pending approval is polled
    renew_before_seconds: int = 60  # renew a lease this long before it ends
    retry_seconds: int = 30  # retry an in-doubt commit (or an undo in doubt) this often
    # HATP-TXN-31: how many sends of one branch's undo may end in doubt before it is offered for recovery
    undo_attempts: int = 10

    def __post_init__(self) -> None:
        """Raises HatpError HATP-TXN-33 for an undo bound below one send."""
        if self.undo_attempts < 1:
            raise HatpError(
                "HATP-TXN-33",
                f"an undo is sent at least once; undo attempts {self.undo_attempts} bounds nothing",
                path="$.undoAttempts",
                code="BAD_CONFIG",
                fix="give the coordinator --undo-attempts 1 or more",
            )


# Each group's `copy` copies its containers: their items are immutable or never changed in place. It passes the fields
# in their order, not by keyword (a snapshot is taken for every event, and keywords cost more); a test holds
# each field to itself (tests/core/txn/test_data.py).


@dataclass(slots=True)
class Votes:
    """Phase 1: what each branch answered and what is still out."""

    votes: dict[str, str] = field(default_factory=dict)  # branchId -> yes | no | quoted | pending | unknown
    preconditions: dict[str, dict[str, Any]] = field(default_factory=dict)  # from the signed prepare receipts
    valid_until: dict[str, datetime] = field(default_factory=dict)  # quotes: until when they hold
    inflight: set[str] = field(default_factory=set)  # branchIds with a phase-1 call out
    quoting: set[str] = field(default_factory=set)  # branchIds asked for a quote (not a prepare)
    pending_phase: dict[str, str] = field(default_factory=dict)  # participants that voted pending: what was asked

    def copy(self) -> Votes:
        return Votes(
            self.votes.copy(),
            self.preconditions.copy(),
            self.valid_until.copy(),
            self.inflight.copy(),
            self.quoting.copy(),
            self.pending_phase.copy(),
        )


@dataclass(slots=True)
class Holds:
    """The holds' leases and horizons, and the holds being renewed, lost or lapsed."""

    leases: dict[str, datetime] = field(default_factory=dict)  # branchId -> leaseExpiresAt
    horizons: dict[str, datetime] = field(default_factory=dict)  # branchId -> holdHorizon
    renewing: set[str] = field(default_factory=set)  # a renew (or a new prepare of a lost hold) is out
    no_renew: set[str] = field(default_factory=set)  # a renew failed: not asked again
    lost: set[str] = field(default_factory=set)  # released by the participant before the end: being placed again
    lapsed: set[str] = field(default_factory=set)  # ended after the final branch committed: recovery is offered

    def copy(self) -> Holds:
        return Holds(
            self.leases.copy(),
            self.horizons.copy(),
            self.renewing.copy(),
            self.no_renew.copy(),
            self.lost.copy(),
            self.lapsed.copy(),
        )


@dataclass(slots=True)
class Approvals:
    """The human side: each requirement's status, the approval deadline, and the terms sent and accepted."""

    status: dict[str, str] = field(default_factory=dict)  # requirementId -> asked | pending | yes | no
    asked: bool = False
    deadline: datetime | None = None  # the coordinator's approval deadline
    gw_deadline: dict[str, datetime] = field(default_factory=dict)  # requirementId -> the gateway's signed decideBy
    terms_sent: dict[str, ApprovalTerms] = field(default_factory=dict)  # the last terms sent with tighten
    terms: dict[str, ApprovalTerms] = field(default_factory=dict)  # the terms the gateway accepted (HATP-MODE-8)

    def copy(self) -> Approvals:
        return Approvals(
            self.status.copy(),
            self.asked,
            self.deadline,
            self.gw_deadline.copy(),
            self.terms_sent.copy(),
            self.terms.copy(),
        )


@dataclass(slots=True)
class Progress:
    """Phase 2: the decision, what committed, the call that is out, what is in doubt, and what is being undone."""

    decision: str | None = None  # commit | abort | None (not decided)
    committed: dict[str, str | None] = field(default_factory=dict)  # branchId -> undo token
    step: str | None = None  # the phase-2 branch whose call is out
    holds_out: set[str] = field(default_factory=set)  # holds whose commits are out together, after the final
    holds_refused: list[str] = field(default_factory=list)  # of those, the ones whose commit was refused
    doubt: str | None = None  # the branch whose commit is in doubt
    escalated: bool = False
    abort_queue: list[tuple[str, str]] = field(default_factory=list)  # (phase, branchId), in reverse commit order
    undone: set[str] = field(default_factory=set)  # released or compensated
    undo_failed: list[str] = field(default_factory=list)  # refused: definitely not undone
    undo_doubts: dict[str, int] = field(default_factory=dict)  # branchId -> undo sends that ended in doubt
    undo_unresolved: list[str] = field(default_factory=list)  # still in doubt at the bound: offered for recovery
    answered: bool = False  # the outcome.decided event is recorded (HATP-TXN-25): the agent may be told

    def copy(self) -> Progress:
        return Progress(
            self.decision,
            self.committed.copy(),
            self.step,
            self.holds_out.copy(),
            self.holds_refused.copy(),
            self.doubt,
            self.escalated,
            self.abort_queue.copy(),
            self.undone.copy(),
            self.undo_failed.copy(),
            self.undo_doubts.copy(),
            self.undo_unresolved.copy(),
            self.answered,
        )


@dataclass(frozen=True, slots=True)
class Approving:
    """What a record waiting only for its humans shows (hatp_mcp.core.txn.resume, HATP-TXN-22): each open ask's
    requirementId and the gateway's signed decideBy."""

    pending: Mapping[str, datetime]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one event may change, taken before it is handled and put back if handling fails."""

    state: TxnState
    phase1: Votes
    holds: Holds
    approvals: Approvals
    phase2: Progress
    timers: dict[str, datetime]


class Txn:
    """One transaction as the machine knows it. Fixed: plan, digest, keys, configuration, branches, commit order
    and the machine's transition function; chosen before Start: mode and timing; changed by events: `state` (only
    through `fire`) and the five groups."""

    __slots__ = (
        "abort_request",
        "approvals",
        "branches",
        "config",
        "holds",
        "keyring",
        "mode",
        "order",
        "phase1",
        "phase2",
        "plan",
        "plan_digest",
        "recovering",
        "resume",
        "state",
        "timers",
        "timing",
        "transition",
        "validated",
    )

    def __init__(
        self, plan: Plan, mode: str, timing: Timing, keyring: Keyring, config: Config, transition: Transition
    ) -> None:
        self.plan = plan
        self.plan_digest = plan.digest()
        self.mode = mode
        self.timing = timing
        self.keyring = keyring
        self.config = config
        self.transition = transition
        self.branches: dict[str, Branch] = {b.branch_id: b for b in plan.branches}
        self.order = commit_order(plan)
        self.validated = False
        self.recovering: str | None = None  # a replacement's logged decision, or "presumed-abort"
        self.abort_request: dict[str, Any] | None = None  # the agent's, when it made a replacement finish
        # a replacement without a decision: the open asks its record waits for (HATP-TXN-22), or why it presumes abort
        self.resume: Approving | str | None = None
        self.state = TxnState.NEW
        self.phase1 = Votes()
        self.holds = Holds()
        self.approvals = Approvals()
        self.phase2 = Progress()
        self.timers: dict[str, datetime] = {}  # key -> when it fires

    def fire(self, step: Step) -> None:
        """Move to the state the machine's table gives for `step` from here. Raises HatpError HATP-TXN-13 when the
        table has no such pair (the machine then restores the event's snapshot)."""
        self.state = self.transition(self.state, step)

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.state,
            self.phase1.copy(),
            self.holds.copy(),
            self.approvals.copy(),
            self.phase2.copy(),
            self.timers.copy(),
        )

    def restore(self, saved: Snapshot) -> None:
        self.state = saved.state
        self.phase1, self.holds, self.approvals, self.phase2 = saved.phase1, saved.holds, saved.approvals, saved.phase2
        self.timers = saved.timers


def arm(t: Txn, key: str, at: datetime) -> list[Command]:
    """Arm (or re-arm) timer `key`; a timer that fires with another time than the armed one is stale."""
    t.timers[key] = at
    return [Arm(key=key, at=at)]


def refused(subject: str, exc: HatpError) -> Record:
    """The record of evidence that cannot be counted, with the rule it broke."""
    return Record(
        event="evidence.refused",
        body={"branchId": subject, "rule": exc.rule, "code": exc.code, "reason": exc.reason[:500]},
    )

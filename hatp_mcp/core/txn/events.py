"""The coordinator state machine's vocabulary: its states, the events a driver feeds it, the steps its phases
name, and the commands it returns.

A `Step` is what a phase function did that moves the transaction (it decided commit, a commit went in doubt, it
finished); which state a step leads to is the machine's table alone (hatp_mcp.core.txn.machine.TRANSITIONS).
Events and commands are frozen, slotted, keyword-only dataclasses. Pure data: no IO, no logic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from hatp_mcp.core.model.terms import ApprovalTerms

__all__ = [
    "ApproverReply",
    "Arm",
    "Ask",
    "CallFailed",
    "Command",
    "Decide",
    "Escalate",
    "Event",
    "Finish",
    "Outcome",
    "Poll",
    "PrepareAnswer",
    "ReceiptAnswer",
    "Record",
    "SendAbort",
    "SendCommit",
    "SendCompensate",
    "SendPrepare",
    "SendRenew",
    "Start",
    "Step",
    "Tighten",
    "Timer",
    "TxnState",
    "Withdraw",
]


class TxnState(Enum):
    NEW = "new"
    QUOTING = "quoting"  # approval-first: quotes and dry runs out
    PREPARING = "preparing"  # prepares out (parallel: the approval too)
    APPROVING = "approving"  # waiting for the human with everything prepared (or quoted)
    COMMITTING = "committing"  # decision commit is durable; phase 2 runs branch by branch
    IN_DOUBT = "in-doubt"  # a commit timed out: neither failed nor succeeded
    ABORTING = "aborting"  # decision abort is durable; releasing and compensating
    COMMITTED = "committed"
    ABORTED = "aborted"
    NEEDS_RECOVERY = "needs-recovery"  # committed the irreversible step, but something could not follow it


class Step(Enum):
    """What happened, as a phase function names it; the machine's table says where each leads from each state."""

    STARTED_QUOTING = "started-quoting"  # approval-first: the quotes and dry runs are sent
    STARTED_PREPARING = "started-preparing"  # the prepares are sent (parallel: the approval asked too)
    RESUMED_COMMIT = "resumed-commit"  # a replacement coordinator carries out the logged commit decision
    RESUMED_APPROVING = "resumed-approving"  # a replacement waits again for the humans its record was waiting for
    ASKED_APPROVERS = "asked-approvers"  # every quote (or holds-first: every hold) is in; the humans are asked
    BRANCHES_VOTED_YES = "branches-voted-yes"  # parallel: every branch is prepared, the humans not yet
    APPROVED_QUOTES = "approved-quotes"  # approval-first: the humans said yes; the quoted holds are prepared
    DECIDED_COMMIT = "decided-commit"  # every branch and every approver voted yes: commit is decided
    DECIDED_ABORT = "decided-abort"  # abort is decided (or, for a replacement, presumed or resumed)
    COMMIT_IN_DOUBT = "commit-in-doubt"  # a commit neither failed nor succeeded (HATP-TXN-10)
    DOUBT_RESOLVED = "doubt-resolved"  # the commit in doubt answered; phase 2 goes on
    FINISHED_COMMITTED = "finished-committed"
    FINISHED_ABORTED = "finished-aborted"
    FINISHED_NEEDS_RECOVERY = "finished-needs-recovery"


class Outcome(Enum):
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"
    NEEDS_RECOVERY = "NEEDS_RECOVERY"


# ---- events ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    kind = "start"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrepareAnswer:
    """A participant's prepare (or quote) result: its signed vote and receipt as received."""

    kind = "prepared"
    branch_id: str
    vote: dict[str, Any]
    receipt: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptAnswer:
    """A renew, commit, abort or compensate result: the participant's signed receipt."""

    kind = "receipt"
    branch_id: str
    receipt: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFailed:
    """A call that did not answer within its bound, or failed in transport. For a commit: in doubt."""

    kind = "failed"
    branch_id: str
    phase: str
    reason: str
    unanswered: bool = False  # no answer came (transport, timeout): it says nothing of what the other side did


@dataclass(frozen=True, slots=True, kw_only=True)
class ApproverReply:
    kind = "approver"
    requirement_id: str
    vote: dict[str, Any]
    approval: dict[str, Any] | None = None
    terms: ApprovalTerms | None = None  # set when this answers a Tighten the gateway accepted (HATP-MODE-7)


@dataclass(frozen=True, slots=True, kw_only=True)
class Timer:
    """A deadline armed with `Arm(key, at)` has passed. Stale timers (re-armed since) are ignored."""

    kind = "timer"
    key: str
    at: datetime


Event = Start | PrepareAnswer | ReceiptAnswer | CallFailed | ApproverReply | Timer


# ---- commands ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """Append a record event (persisted before any send in the same batch)."""

    event: str
    body: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, Any] | None = None
    author: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decide:
    """Write the decision to the durable decision log (and the record) before phase 2 sends anything."""

    decision: str  # commit | abort
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SendPrepare:
    branch_id: str
    quote_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class SendRenew:
    branch_id: str
    lease_seconds: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SendCommit:
    branch_id: str
    preconditions: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class SendAbort:
    branch_id: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SendCompensate:
    branch_id: str
    undo_token: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    requirement_id: str
    terms: ApprovalTerms | None = None  # holds-first: the deadline and holds the human approves under


@dataclass(frozen=True, slots=True, kw_only=True)
class Poll:
    requirement_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Withdraw:
    requirement_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Tighten:
    """Ask the gateway to shrink a pending ask's deadline and bind these terms (HATP-MODE-7)."""

    requirement_id: str
    terms: ApprovalTerms


@dataclass(frozen=True, slots=True, kw_only=True)
class Arm:
    key: str
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalate:
    to: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """Close the record with this outcome; the transaction is over."""

    outcome: Outcome


Command = (
    Record
    | Decide
    | SendPrepare
    | SendRenew
    | SendCommit
    | SendAbort
    | SendCompensate
    | Ask
    | Poll
    | Withdraw
    | Tighten
    | Arm
    | Escalate
    | Finish
)

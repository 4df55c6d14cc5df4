"""The journal machine's vocabulary: saga statuses, step states, the events a driver feeds it, the commands it
returns, and the names of the entries it writes (the journal record's events).

Events and commands are frozen, slotted, keyword-only dataclasses. Pure data: no IO, no logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = [
    "ENTRIES",
    "ArmRetry",
    "CallStep",
    "CallUndo",
    "Command",
    "Complete",
    "DeadLetter",
    "Event",
    "Finished",
    "Lookup",
    "LookupAnswered",
    "Recovered",
    "RetryDue",
    "Rollback",
    "SagaStatus",
    "StartStep",
    "StepCompleted",
    "StepFailed",
    "StepState",
    "UndoAnswered",
    "Write",
]


class SagaStatus(Enum):
    IN_PROGRESS = "IN_PROGRESS"  # steps are being run
    COMPLETED = "COMPLETED"  # every step ran; nothing to undo
    FAILED = "FAILED"  # the saga failed (or was told to roll back); its rollback has not finished
    ROLLED_BACK = "ROLLED_BACK"  # every completed step (back to a pivot) was undone or had no undo
    ROLLBACK_FAILED = "ROLLBACK_FAILED"  # a step could not be undone (`leftInPlace`) or stayed in doubt (a dead letter)


class StepState(Enum):
    PENDING = "PENDING"  # written, its call went out (or is about to), no result yet
    IN_DOUBT = "IN_DOUBT"  # the call went out and its result was lost (a crash, a cancellation): outcome unknown
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"  # the call failed: nothing happened, nothing to undo
    UNDOING = "UNDOING"  # its undo went out (or waits for a retry), no result yet
    ROLLED_BACK = "ROLLED_BACK"
    ROLLBACK_FAILED = "ROLLBACK_FAILED"  # its undo failed every bounded retry: a dead letter holds it


# The entries the machine writes; each is one event of the journal record (hatp_mcp/core/journal/record.py).
ENTRIES = (
    "saga.begin",
    "step.started",
    "step.completed",
    "step.failed",
    "step.in-doubt",
    "lookup.happened",
    "lookup.absent",
    "step.dead-letter",
    "saga.recovered",
    "saga.rollback",
    "step.skipped",
    "rollback.stopped",
    "undo.started",
    "undo.done",
    "undo.failed",
    "undo.gave-up",
    "saga.closed",
)


# -- events (what the driver feeds the machine) ----------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class StartStep:
    """A tool call is about to go out. `has_undo`: the tool declares an undo; `pivot`: it cannot be undone and
    rollback stops at it (HATP-JRN-5); `irreversible`: it cannot be undone, rollback goes on past it and the saga
    cannot end ROLLED_BACK (HATP-JRN-19); `rule`: how its journaler will undo and look it up (the proxy's policy rule,
    spec/proxy.md HATP-PXY-44), kept in the step's own entry so that it is durable with the step, in one write."""

    step_id: str
    tool: str
    args: dict[str, Any]
    has_undo: bool
    pivot: bool = False
    irreversible: bool = False
    rule: dict[str, Any] | None = None
    kind: str = "start"


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleted:
    step_id: str
    output: Any = None
    kind: str = "completed"


@dataclass(frozen=True, slots=True, kw_only=True)
class StepFailed:
    """The call answered with a failure: it did not happen. (A lost answer is not a failure: leave it pending.)"""

    step_id: str
    error: str
    kind: str = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Complete:
    kind: str = "complete"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rollback:
    reason: str
    kind: str = "rollback"


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """The journal reopened its store and found this saga unfinished. `policy`: "rollback" (the default: undo
    what is known to have happened) or "resume" (resolve in-doubt steps, leave the saga in progress)."""

    policy: str = "rollback"
    kind: str = "recovered"


@dataclass(frozen=True, slots=True, kw_only=True)
class LookupAnswered:
    """The tool's lookup for an in-doubt step: `happened` True / False, or None when it cannot tell (no lookup,
    it failed): then the step is a dead letter, never guessed (HATP-JRN-6)."""

    step_id: str
    happened: bool | None
    output: Any = None
    error: str | None = None
    kind: str = "lookup"


@dataclass(frozen=True, slots=True, kw_only=True)
class UndoAnswered:
    """An undo's answer. `retryable=False`: retrying cannot help (the tool is unknown, the undo was refused)."""

    step_id: str
    ok: bool
    output: Any = None
    error: str | None = None
    retryable: bool = True
    kind: str = "undo"


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDue:
    step_id: str
    kind: str = "retry"


Event = (
    StartStep | StepCompleted | StepFailed | Complete | Rollback | Recovered | LookupAnswered | UndoAnswered | RetryDue
)


# -- commands (what the driver does, in order; every Write before anything after it) ----------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Write:
    """Append this entry to the saga's journal, durably, before doing any command that follows it."""

    event: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallStep:
    step_id: str
    tool: str
    args: dict[str, Any]
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallUndo:
    step_id: str
    tool: str
    args: dict[str, Any]
    output: Any
    key: str
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup:
    step_id: str
    tool: str
    args: dict[str, Any]
    key: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ArmRetry:
    step_id: str
    at: str  # absolute, a wire timestamp


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    """Everything a person needs to finish by hand what the journal could not (HATP-JRN-8)."""

    entry: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finished:
    status: SagaStatus


Command = Write | CallStep | CallUndo | Lookup | ArmRetry | DeadLetter | Finished

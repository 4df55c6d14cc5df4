"""What the journal and the proxy put on the wire (spec/journal.md HATP-JRN-20): the proxy's saga tools' arguments
and answers, the journal server's saga answers, dead letters, and the proxy's shadow log entries and policy status.
Schemas only: the servers build these objects as dicts (hatp_mcp/mcp/journal_proxy.py, journal_server.py); these
models describe them, so that `hatp schemas --write spec/schemas` publishes them beside the other wire types and a
test checks every answer against the schema on disk.

The states are the journal's (hatp_mcp/core/journal/events.py: SagaStatus, StepState), spelled out here because
the model layer imports no journal code; a test keeps the two lists equal.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from hatp_mcp.core.model.base import WireModel

__all__ = [
    "SAGA_STATUSES",
    "STEP_STATES",
    "DeadLetter",
    "JournalSagaStatus",
    "JournalStep",
    "PolicyInForce",
    "PolicyRefusal",
    "PolicyStatus",
    "ProxyDeadLetter",
    "ProxySagaStatus",
    "ProxyStep",
    "SagaBeginRequest",
    "SagaRequest",
    "SagaRollbackRequest",
    "ShadowEntry",
]

SagaStatusName = Literal["IN_PROGRESS", "COMPLETED", "FAILED", "ROLLED_BACK", "ROLLBACK_FAILED"]
StepStateName = Literal["PENDING", "IN_DOUBT", "COMPLETED", "FAILED", "UNDOING", "ROLLED_BACK", "ROLLBACK_FAILED"]
SAGA_STATUSES: tuple[str, ...] = get_args(SagaStatusName)
STEP_STATES: tuple[str, ...] = get_args(StepStateName)


class SagaBeginRequest(WireModel):
    """The proxy's `saga_begin` arguments: the saga's name (not `outside-saga`, HATP-PXY-9)."""

    name: str


class SagaRequest(WireModel):
    """The proxy's `saga_complete` and `saga_status` arguments: another open saga than the current one."""

    saga_id: str | None = Field(default=None, alias="saga_id")


class SagaRollbackRequest(WireModel):
    """The proxy's `saga_rollback` arguments: why, and another open saga than the current one."""

    reason: str | None = None
    saga_id: str | None = Field(default=None, alias="saga_id")


class ProxyStep(WireModel):
    """One step of a proxy's saga: the upstream tool called, its state, what rollback did with it."""

    step_id: str
    tool: str
    state: StepStateName
    rollback: str | None = None
    irreversible: bool | None = None
    error: str | None = None


class ProxyDeadLetter(WireModel):
    """Why a step was left for a person (HATP-PXY-10): its phase (execute, undo, recover) and the error."""

    step_id: str | None = None
    tool: str | None = None
    phase: str | None = None
    error: str | None = None


class ProxySagaStatus(WireModel):
    """Every answer of the proxy's saga tools (HATP-PXY-8..10): the saga, its steps, the steps a rollback left
    in place, whether a restart found it open (and what to do next), its dead letters, the other open sagas."""

    saga_id: str
    name: str
    status: SagaStatusName
    steps: list[ProxyStep]
    left_in_place: list[str] | None = None
    recovered: bool | None = None
    next: str | None = None
    dead_letters: list[ProxyDeadLetter] | None = None
    open_sagas: list[str] | None = None


class DeadLetter(WireModel):
    """A step the journal left for a person (HATP-JRN-5, 6), as its store keeps it and `hatp proxy dead-letters`
    lists it (with its `id`); a saga whose record did not verify at recovery has only `sagaId`, `phase` and
    `error`."""

    id: int | None = None
    saga_id: str
    saga: str | None = None
    step_id: str | None = None
    tool: str | None = None
    phase: Literal["execute", "undo", "recover"]
    input: dict[str, Any] | None = None
    output: Any = None
    error: str
    attempts: int | None = None
    key: str | None = None


class JournalStep(WireModel):
    """One step of a saga on the journal server (servers.journal): what the agent said it does, its undo call,
    the idempotency key to send with the call, and where it stands."""

    step_id: str
    action: Any = None
    state: StepStateName
    key: str
    pivot: bool
    undo: dict[str, Any] | None = None
    output: Any = None
    error: str | None = None
    rollback: str | None = None
    undo_attempts: int | None = None
    retry_at: str | None = None


class JournalSagaStatus(WireModel):
    """The journal server's saga answers (saga_begin, saga_rollback, saga_complete, saga_status): the saga, its
    steps, who owns it, where a rollback stopped, its dead letters and (asked for) its signed record."""

    saga_id: str
    name: str
    status: SagaStatusName
    steps: list[JournalStep]
    owner: str | None = None
    stopped_at: str | None = None
    dead_letters: list[DeadLetter] | None = None
    record: dict[str, Any] | None = None


class ShadowEntry(WireModel):
    """A call shadow mode let through (HATP-PXY-40): the refusal its policy would have given, and the digest of
    its arguments, never the arguments (HATP-PXY-41)."""

    id: int | None = None
    at: str
    tool: str
    policy: Literal["hide", "deny", "gate"]
    rule: str
    code: str | None = None
    reason: str
    path: str | None = None
    arguments_digest: str | None


class PolicyInForce(WireModel):
    """The policy file's content in force (its SHA-256) and since when."""

    sha256: str
    since: str


class PolicyRefusal(WireModel):
    """The last changed policy file refused, with the rule, the path and the fix (HATP-PXY-43)."""

    at: str
    rule: str
    code: str | None = None
    reason: str
    path: str | None = None
    fix: str | None = None
    sha256: str | None = None


class PolicyStatus(WireModel):
    """DATA/policy-status.json, as `hatp proxy status` prints it (HATP-PXY-43)."""

    policy_file: str
    in_force: PolicyInForce
    refused: PolicyRefusal | None = None

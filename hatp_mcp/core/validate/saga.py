"""Saga plan artifacts (the apology-protocol format) and their rules, so that validator's users can switch. Pure.

The artifact: `sagaId`, `planVersion`, `authoredBy {agent, model}`, `signature`, `pivotIndex`,
`mandate {maxSpendEur, expiresAt}`, `steps[]` (`id`, `tool`, `class`, `compensation?`, `idempotencyKey`,
`undoTtlSeconds?`, `maxSpendEur?`, `maxDurationSeconds?`); every object strict. Violations carry that validator's
rule names (`schema`, `pivot-ordering`, `class-coherence`, `mandate`, `undo-ttl`, `key-integrity`) so results
compare one to one; spec/validation.md defines them as HATP-SAGA-1..6. Numbers may be floats here (money in
EUR as JSON numbers), so the key hash canonicalizes with floats allowed. This module must not read the clock or
do IO: `now` is an argument.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hatp_mcp.core.evidence.canonical import canonical
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.validate.violation import Violation, schema_violations

__all__ = ["SAGA_CHECKS", "SagaCheck", "SagaPlan", "SagaStep", "step_key_hash", "validate_saga"]


def _ts(value: str) -> str:
    parse_ts(value)
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class SagaCompensation(_Strict):
    tool: str = Field(min_length=1)
    args: dict[str, Any] | None = None


class SagaStep(_Strict):
    id: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    step_class: Literal["compensable", "retriable", "irreversible"] = Field(alias="class")
    compensation: SagaCompensation | None = None
    idempotency_key: str = Field(alias="idempotencyKey", min_length=1)
    undo_ttl_seconds: int | None = Field(default=None, alias="undoTtlSeconds", gt=0)
    max_spend_eur: float | None = Field(default=None, alias="maxSpendEur", ge=0)
    max_duration_seconds: int | None = Field(default=None, alias="maxDurationSeconds", ge=0)


class SagaAuthor(_Strict):
    agent: str = Field(min_length=1)
    model: str = Field(min_length=1)


class SagaMandate(_Strict):
    max_spend_eur: float = Field(alias="maxSpendEur", ge=0)
    expires_at: Annotated[str, AfterValidator(_ts)] = Field(alias="expiresAt")


class SagaPlan(_Strict):
    comment: str | None = Field(default=None, alias="$comment")
    saga_id: str = Field(alias="sagaId", min_length=1)
    plan_version: int = Field(alias="planVersion", gt=0)
    authored_by: SagaAuthor = Field(alias="authoredBy")
    signature: str = Field(min_length=1)
    pivot_index: int = Field(alias="pivotIndex", ge=0)
    mandate: SagaMandate
    steps: list[SagaStep] = Field(min_length=1)


def step_key_hash(step: dict[str, Any]) -> str:
    """sha256 hex of the RFC 8785 form of a step as received, without its own `idempotencyKey` member."""
    body = {k: v for k, v in step.items() if k != "idempotencyKey"}
    return hashlib.sha256(canonical(body, allow_floats=True)).hexdigest()


def _keys_and_ids(plan: SagaPlan) -> list[Violation]:
    """Schema-level refinements: unique step ids, and keys that start `<sagaId>:<stepId>` (as that validator's
    schema demands)."""
    out: list[Violation] = []
    seen: dict[str, int] = {}
    for i, s in enumerate(plan.steps):
        if s.id in seen:
            out.append(
                Violation(
                    rule="schema",
                    path=f"steps[{i}].id",
                    message=f'steps[{i}] reuses the id "{s.id}" of steps[{seen[s.id]}]: idempotency keys derive '
                    f"from step ids, so two steps would share one. Give each step its own id.",
                )
            )
        seen.setdefault(s.id, i)
        base = f"{plan.saga_id}:{s.id}"
        if s.idempotency_key != base and not s.idempotency_key.startswith(base + ":"):
            out.append(
                Violation(
                    rule="schema",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{s.id}" carries idempotencyKey "{s.idempotency_key}", but a key is derived as '
                    f'"<sagaId>:<stepId>[:<sha256>]". Use "{base}" or "{base}:<sha256 of the step>".',
                )
            )
    return out


def _pivot_in_range(plan: SagaPlan) -> bool:
    return plan.pivot_index < len(plan.steps)


def check_pivot_ordering(plan: SagaPlan, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-2 (`pivot-ordering`)."""
    n, p = len(plan.steps), plan.pivot_index
    if p >= n:
        return [
            Violation(
                rule="pivot-ordering",
                path="pivotIndex",
                message=f"pivotIndex is {p}, but the saga has {n} steps (indices 0..{n - 1}): the pivot must be a real "
                f"step. Point pivotIndex at the first irreversible step.",
            )
        ]
    out: list[Violation] = []
    for i, s in enumerate(plan.steps):
        if i < p and s.step_class != "compensable":
            out.append(
                Violation(
                    rule="pivot-ordering",
                    path=f"steps[{i}].class",
                    message=f'Step "{s.id}" ({s.tool}) is {s.step_class} but comes before the pivot (index {p}): if a '
                    f"later step fails it cannot be undone. Make it compensable, or move it to or past the pivot.",
                )
            )
        elif i >= p and s.step_class == "compensable":
            out.append(
                Violation(
                    rule="pivot-ordering",
                    path=f"steps[{i}].class",
                    message=f'Step "{s.id}" ({s.tool}) is compensable but sits at or after the pivot (index {p}), '
                    f"where nothing is rolled back: its compensation would never run. Move it before the pivot, or "
                    f"class it retriable or irreversible.",
                )
            )
    return out


def check_class_coherence(plan: SagaPlan, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-3 (`class-coherence`)."""
    out: list[Violation] = []
    for i, s in enumerate(plan.steps):
        if s.step_class == "irreversible" and s.compensation is not None:
            out.append(
                Violation(
                    rule="class-coherence",
                    path=f"steps[{i}].compensation",
                    message=f'Step "{s.id}" ({s.tool}) claims irreversible and also ships an undo '
                    f"({s.compensation.tool}): it is lying about one of them. Drop the compensation, or class it "
                    f"compensable.",
                )
            )
        elif s.step_class == "compensable" and s.compensation is None:
            out.append(
                Violation(
                    rule="class-coherence",
                    path=f"steps[{i}].compensation",
                    message=f'Step "{s.id}" ({s.tool}) claims compensable but ships no compensation: a step that '
                    f"can be undone must say how. Declare compensation {{tool, args}}, or class it differently.",
                )
            )
    return out


def _eur(x: float) -> str:
    return f"{x:g} EUR"


def check_mandate(plan: SagaPlan, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-4 (`mandate`): each step and all steps together within maxSpendEur; the mandate not expired."""
    cap = plan.mandate.max_spend_eur
    out: list[Violation] = []
    for i, s in enumerate(plan.steps):
        if s.max_spend_eur is not None and s.max_spend_eur > cap:
            out.append(
                Violation(
                    rule="mandate",
                    path=f"steps[{i}].maxSpendEur",
                    message=f'Step "{s.id}" ({s.tool}) may spend {_eur(s.max_spend_eur)}, over the mandate\'s '
                    f"{_eur(cap)}. Lower the step's spend, or ask the principal for a larger mandate.",
                )
            )
    if not out:
        spends = [(s.id, s.max_spend_eur) for s in plan.steps if s.max_spend_eur is not None]
        total = sum(x for _, x in spends)
        if total > cap:
            parts = " + ".join(f"{sid} {x:g}" for sid, x in spends)
            out.append(
                Violation(
                    rule="mandate",
                    path="mandate.maxSpendEur",
                    message=f"Together the steps may spend {_eur(total)} ({parts}), over the mandate's {_eur(cap)}, "
                    f"though each alone fits. Lower the spends by {_eur(total - cap)}, or ask for a larger mandate.",
                )
            )
    if parse_ts(plan.mandate.expires_at) <= now:
        out.append(
            Violation(
                rule="mandate",
                path="mandate.expiresAt",
                message=f"The mandate expired at {plan.mandate.expires_at} and it is now "
                f"{now.strftime('%Y-%m-%dT%H:%M:%SZ')}: the plan must not outlive it. Ask the principal for a new "
                f"mandate.",
            )
        )
    return out


def check_undo_ttl(plan: SagaPlan, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-5 (`undo-ttl`): each undo window outlasts the worst case from its step's end to the pivot's end."""
    p = plan.pivot_index
    if p >= len(plan.steps):
        return []  # pivot-ordering owns this failure
    steps = plan.steps
    out: list[Violation] = []
    blamed: set[int] = set()
    for i in range(p):
        ttl = steps[i].undo_ttl_seconds
        if ttl is None or steps[i].step_class != "compensable":
            continue
        path = range(i + 1, p + 1)
        unbounded = [j for j in path if steps[j].max_duration_seconds is None]
        for j in unbounded:
            if j in blamed:
                continue
            blamed.add(j)
            s = steps[j]
            if j < p:
                fix = f'Declare maxDurationSeconds on "{s.id}", or move the human step past the pivot.'
            else:
                fix = f'Declare maxDurationSeconds on the pivot "{s.id}".'
            out.append(
                Violation(
                    rule="undo-ttl",
                    path=f"steps[{j}].maxDurationSeconds",
                    message=f'Step "{s.id}" ({s.tool}) declares no maxDurationSeconds: its worst-case duration is '
                    f'unbounded, so the {ttl}s undo window of "{steps[i].id}" ({steps[i].tool}) cannot be shown to '
                    f'last until the pivot "{steps[p].id}" ends. {fix}',
                )
            )
        if unbounded:
            continue
        worst = sum(steps[j].max_duration_seconds or 0 for j in path)
        if worst > ttl:
            parts = " + ".join(f"{steps[j].id} {steps[j].max_duration_seconds}s" for j in path)
            out.append(
                Violation(
                    rule="undo-ttl",
                    path=f"steps[{i}].undoTtlSeconds",
                    message=f'The undo of "{steps[i].id}" ({steps[i].tool}) works for {ttl}s, but from its end to the '
                    f'end of the pivot "{steps[p].id}" can take {worst}s ({parts}): the rollback could expire before '
                    f"the saga knows it needs it. Lengthen undoTtlSeconds to at least {worst}, shorten those steps, "
                    f"or move the step closer to the pivot.",
                )
            )
    return out


def check_key_integrity(plan: SagaPlan, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-6 (`key-integrity`): a three-part key's hash is the hash of the step's canonical bytes."""
    out: list[Violation] = []
    raw_steps = raw["steps"]
    for i, s in enumerate(plan.steps):
        prefix = f"{plan.saga_id}:{s.id}:"
        if not s.idempotency_key.startswith(prefix):
            continue
        claimed = s.idempotency_key[len(prefix) :]
        actual = step_key_hash(raw_steps[i])
        if claimed != actual:
            out.append(
                Violation(
                    rule="key-integrity",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{s.id}" ({s.tool}) carries the key hash "{claimed}", but the step\'s canonical '
                    f'bytes hash to "{actual}": same key, different bytes, exactly the replay the key exists to '
                    f'catch. Recompute the key as "{prefix}{actual}", or restore the step it was computed over.',
                )
            )
    return out


SagaCheck = Callable[[SagaPlan, dict[str, Any], datetime], list[Violation]]
# name -> check, in the order they report. `schema` (HATP-SAGA-1) runs first, in validate_saga.
SAGA_CHECKS: tuple[tuple[str, SagaCheck], ...] = (
    ("pivot-ordering", check_pivot_ordering),
    ("class-coherence", check_class_coherence),
    ("mandate", check_mandate),
    ("undo-ttl", check_undo_ttl),
    ("key-integrity", check_key_integrity),
)


def validate_saga(value: Any, now: datetime) -> list[Violation]:
    """Every violation of a saga artifact at `now`: schema violations only when it does not match its schema."""
    plan, errors = schema_violations(SagaPlan, value)
    if not isinstance(plan, SagaPlan):
        return errors
    refinements = _keys_and_ids(plan)
    if refinements:
        return refinements
    out: list[Violation] = []
    for _name, check in SAGA_CHECKS:
        out.extend(check(plan, value, now))
    return out

"""Saga plan artifacts (the apology-protocol format) and their rules, so that validator's users can switch. Pure.

The artifact: `sagaId`, `planVersion`, `authoredBy {agent, model}`, `signature`, `pivotIndex`,
`mandate {maxSpendEur, expiresAt}`, `steps[]` (`id`, `tool`, `class`, `compensation?`, `idempotencyKey`,
`undoTtlSeconds?`, `maxSpendEur?`, `maxDurationSeconds?`); every object strict. Violations carry that validator's
rule names (`schema`, `pivot-ordering`, `class-coherence`, `mandate`, `undo-ttl`, `key-integrity`) so results
compare one to one; spec/validation.md defines them as HATP-SAGA-1..6. Numbers may be floats here (money in
EUR as JSON numbers), so the key hash canonicalizes with floats allowed. This module must not read the clock or
do IO: `now` is an argument.

Reading a plan: the pydantic models below are the schema (spec/schemas is generated from them) and explain every
schema violation, but building them costs more than all six rules. So a plan that provably matches is read straight
from its JSON, in one pass that takes only what the model takes (`_view_of_json`, saga_view.py); anything that pass
is not sure of goes to the model, which reports exactly as before or, taking the plan after all, hands its members
back to the same reader. The rules (saga_rules.py) run on what that reader gives (`SagaView`), whichever way it came.
tests/core/validate/test_saga.py holds the model path as the oracle: the same violations (rule, path, message) on
generated near-valid sagas, and the same values read.

The reader and the rules know no pydantic, so that setup.py compiles them with mypyc where a C compiler is there;
this module, the schema, stays Python. tests/core/validate/test_saga_compiled.py holds the compiled modules to their
own Python source.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.validate.saga_rules import (
    _keys_and_ids,
    check_class_coherence,
    check_key_integrity,
    check_mandate,
    check_pivot_ordering,
    check_undo_ttl,
    step_key_hash,
)
from hatp_mcp.core.validate.saga_view import SagaView, _view_of_json
from hatp_mcp.core.validate.violation import Violation, schema_violations

__all__ = ["SAGA_CHECKS", "SagaCheck", "SagaPlan", "SagaStep", "SagaView", "step_key_hash", "validate_saga"]


def _ts(value: str) -> str:
    parse_ts(value)
    return value


def _not_null(value: Any) -> Any:
    """An optional member may be absent, never null: every object is strict (HATP-SAGA-1)."""
    if value is None:
        raise ValueError("null is not allowed here: leave the member out instead")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


class SagaCompensation(_Strict):
    tool: str = Field(min_length=1)
    args: dict[str, Any] | None = None

    _args_not_null = field_validator("args", mode="before")(_not_null)


class SagaStep(_Strict):
    id: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    step_class: Literal["compensable", "retriable", "irreversible"] = Field(alias="class")
    compensation: SagaCompensation | None = None
    idempotency_key: str = Field(alias="idempotencyKey", min_length=1)
    undo_ttl_seconds: int | None = Field(default=None, alias="undoTtlSeconds", gt=0)
    max_spend_eur: float | None = Field(default=None, alias="maxSpendEur", ge=0)
    max_duration_seconds: int | None = Field(default=None, alias="maxDurationSeconds", ge=0)

    _optional_not_null = field_validator(
        "compensation", "undo_ttl_seconds", "max_spend_eur", "max_duration_seconds", mode="before"
    )(_not_null)


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

    _comment_not_null = field_validator("comment", mode="before")(_not_null)


def _json_of_model(plan: SagaPlan) -> dict[str, Any]:
    """The members of a validated plan that the rules read, as JSON the fast reader takes (ints made floats where
    the model made them floats; a str subclass as its str)."""
    steps = []
    for s in plan.steps:
        step: dict[str, Any] = {
            "id": str(s.id),
            "tool": str(s.tool),
            "class": str(s.step_class),
            "idempotencyKey": str(s.idempotency_key),
        }
        if s.compensation is not None:
            step["compensation"] = {"tool": str(s.compensation.tool)}
        if s.undo_ttl_seconds is not None:
            step["undoTtlSeconds"] = s.undo_ttl_seconds
        if s.max_spend_eur is not None:
            step["maxSpendEur"] = s.max_spend_eur
        if s.max_duration_seconds is not None:
            step["maxDurationSeconds"] = s.max_duration_seconds
        steps.append(step)
    return {
        "sagaId": str(plan.saga_id),
        "planVersion": plan.plan_version,
        "authoredBy": {"agent": str(plan.authored_by.agent), "model": str(plan.authored_by.model)},
        "signature": str(plan.signature),
        "pivotIndex": plan.pivot_index,
        "mandate": {"maxSpendEur": plan.mandate.max_spend_eur, "expiresAt": str(plan.mandate.expires_at)},
        "steps": steps,
    }


SagaCheck = Callable[[SagaView, dict[str, Any], datetime], list[Violation]]
# name -> check, in the order they report. `schema` (HATP-SAGA-1) runs first, in validate_saga.
SAGA_CHECKS: tuple[tuple[str, SagaCheck], ...] = (
    ("pivot-ordering", check_pivot_ordering),
    ("class-coherence", check_class_coherence),
    ("mandate", check_mandate),
    ("undo-ttl", check_undo_ttl),
    ("key-integrity", check_key_integrity),
)


def validate_saga(value: Any, now: datetime) -> list[Violation]:
    """Every violation of a saga artifact at `now`: schema violations only when it does not match its schema.

    A plan that provably matches is read straight from its JSON; anything else is validated as `SagaPlan`, which
    reports every schema violation, or takes the plan after all and gives the members the rules read."""
    view = _view_of_json(value)
    if view is None:
        plan, errors = schema_violations(SagaPlan, value)
        if not isinstance(plan, SagaPlan):
            return errors
        view = _view_of_json(_json_of_model(plan))
        if view is None:  # cannot happen: the model's members are what the reader takes; never run rules unread
            raise AssertionError("the saga reader refused the members of a validated SagaPlan")
    refinements = _keys_and_ids(view)
    if refinements:
        return refinements
    out: list[Violation] = []
    for _name, check in SAGA_CHECKS:
        out += check(view, value, now)
    return out

"""The saga rules as they ran over the pydantic models before the fast reader (hatp_mcp/core/validate/saga.py at
0232d0c), kept as the oracle the fast path is tested against: same violations, rule, path and message.

Only tests import this. When a rule or a message changes on purpose, change it here too (the property test in
test_saga.py names the difference)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.canonical import CanonicalError
from hatp_mcp.core.validate.saga import SagaPlan, SagaStep, step_key_hash
from hatp_mcp.core.validate.saga_rules import _HEX64, _PARTS_SHOWN
from hatp_mcp.core.validate.violation import Violation, schema_violations

__all__ = ["oracle_validate_saga"]


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
        key = s.idempotency_key
        if key != base and not key.startswith(base + ":"):
            out.append(
                Violation(
                    rule="schema",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{s.id}" carries idempotencyKey "{key}", but a key is derived as '
                    f'"<sagaId>:<stepId>[:<sha256>]". Use "{base}" or "{base}:<sha256 of the step>".',
                )
            )
        elif key != base and not _HEX64.fullmatch(key[len(base) + 1 :]):
            out.append(
                Violation(
                    rule="schema",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{s.id}" carries idempotencyKey "{key}": what follows "{base}:" must be a sha256 '
                    f'as 64 lowercase hex digits. Use "{base}" or "{base}:<sha256 of the step>".',
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
                message=f"The mandate expired at {when_words(plan.mandate.expires_at, now)}: the plan must not"
                " outlive it. Ask the principal for a new mandate.",
            )
        )
    return out


def _parts(steps: list[SagaStep], first: int, last: int) -> str:
    """`s1 30s + s2 14400s + ...`: the declared durations of steps first..last, at most _PARTS_SHOWN named."""
    named = [
        f"{steps[j].id} {steps[j].max_duration_seconds}s"
        for j in range(first, min(last, first + _PARTS_SHOWN - 1) + 1)
        if steps[j].max_duration_seconds is not None
    ]
    rest = last - first + 1 - min(last - first + 1, _PARTS_SHOWN)
    return " + ".join(named) + (f" + {rest} more steps" if rest else "")


def check_undo_ttl(plan: SagaPlan, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-5 (`undo-ttl`): each undo window outlasts the worst case from its step's end to the pivot's end.

    Linear in the steps: the declared durations from each step to the pivot come from one suffix sum, each
    unbounded step is reported once, and messages name a bounded number of steps. A window that the declared
    durations alone already blow is reported too, even when an unbounded step on its path is also reported."""
    p = plan.pivot_index
    steps = plan.steps
    if p >= len(steps):
        return []  # pivot-ordering owns this failure
    # after[i]: declared seconds of steps i+1..p; unbounded_after[i]: the first unbounded step in i+1..p, or None.
    after = [0] * (p + 1)
    unbounded_after: list[int | None] = [None] * (p + 1)
    for i in range(p - 1, -1, -1):
        d = steps[i + 1].max_duration_seconds
        after[i] = after[i + 1] + (d or 0)
        unbounded_after[i] = i + 1 if d is None else unbounded_after[i + 1]
    windows = [i for i in range(p) if steps[i].undo_ttl_seconds is not None and steps[i].step_class == "compensable"]
    out: list[Violation] = []
    if windows:
        first = windows[0]
        ttl = steps[first].undo_ttl_seconds
        for j in range(first + 1, p + 1):
            if steps[j].max_duration_seconds is not None:
                continue
            # the first window whose path holds step j is the one named; every window before j is blown by it
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
                    f'unbounded, so the {ttl}s undo window of "{steps[first].id}" ({steps[first].tool}) cannot be '
                    f'shown to last until the pivot "{steps[p].id}" ends. {fix}',
                )
            )
    for i in windows:
        ttl = steps[i].undo_ttl_seconds or 0
        worst = after[i]
        if worst <= ttl:
            continue
        bounded = unbounded_after[i] is None
        parts = _parts(steps, i + 1, p)
        at_least = "" if bounded else "at least "
        out.append(
            Violation(
                rule="undo-ttl",
                path=f"steps[{i}].undoTtlSeconds",
                message=f'The undo of "{steps[i].id}" ({steps[i].tool}) works for {ttl}s, but from its end to the '
                f'end of the pivot "{steps[p].id}" can take {at_least}{worst}s ({parts}): the rollback could expire '
                f"before the saga knows it needs it. Lengthen undoTtlSeconds to at least {worst}, shorten those "
                f"steps, or move the step closer to the pivot.",
            )
        )
    out.sort(key=lambda v: _step_index(v.path))
    return out


def _step_index(path: str) -> int:
    return int(path[len("steps[") : path.index("]")])


def check_key_integrity(plan: SagaPlan, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-6 (`key-integrity`): a three-part key's hash is the hash of the step's canonical bytes."""
    out: list[Violation] = []
    raw_steps = raw["steps"]
    for i, s in enumerate(plan.steps):
        prefix = f"{plan.saga_id}:{s.id}:"
        if not s.idempotency_key.startswith(prefix):
            continue
        claimed = s.idempotency_key[len(prefix) :]
        try:
            actual = step_key_hash(raw_steps[i])
        except CanonicalError as exc:  # fail closed: a claim that cannot be checked is not a kept claim
            out.append(
                Violation(
                    rule="key-integrity",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{s.id}" ({s.tool}) claims the key hash "{claimed}", but the step has no exact '
                    f"RFC 8785 form ({exc.reason} at steps[{i}]{exc.path[1:]}), so the claim cannot be checked. "
                    f"{exc.fix or 'Remove that value'}, then recompute the key.",
                )
            )
            continue
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


_Check = Callable[[SagaPlan, dict[str, Any], datetime], list[Violation]]
# name -> check, in the order they report. `schema` (HATP-SAGA-1) runs first, in validate_saga.
_CHECKS: tuple[tuple[str, _Check], ...] = (
    ("pivot-ordering", check_pivot_ordering),
    ("class-coherence", check_class_coherence),
    ("mandate", check_mandate),
    ("undo-ttl", check_undo_ttl),
    ("key-integrity", check_key_integrity),
)


def oracle_validate_saga(value: Any, now: datetime) -> list[Violation]:
    """Every violation of a saga artifact at `now`: schema violations only when it does not match its schema."""
    plan, errors = schema_violations(SagaPlan, value)
    if not isinstance(plan, SagaPlan):
        return errors
    refinements = _keys_and_ids(plan)
    if refinements:
        return refinements
    out: list[Violation] = []
    for _name, check in _CHECKS:
        out.extend(check(plan, value, now))
    return out

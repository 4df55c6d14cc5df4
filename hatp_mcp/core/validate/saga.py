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
import re
from collections.abc import Callable
from datetime import datetime
from itertools import compress
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from hatp_mcp.core.evidence.canonical import CanonicalError, canonical
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.validate.violation import Violation, schema_violations

__all__ = ["SAGA_CHECKS", "SagaCheck", "SagaPlan", "SagaStep", "SagaView", "step_key_hash", "validate_saga"]

_HEX64 = re.compile(r"[0-9a-f]{64}")
# How many steps a message names when it explains a sum; the rest are counted. Output stays linear in the steps.
_PARTS_SHOWN = 6


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


def step_key_hash(step: dict[str, Any]) -> str:
    """sha256 hex of the RFC 8785 form of a step as received, without its own `idempotencyKey` member."""
    body = {k: v for k, v in step.items() if k != "idempotencyKey"}
    return hashlib.sha256(canonical(body, allow_floats=True)).hexdigest()


class SagaView:
    """What the rules read of a plan that matches the schema: the plan's members, and one list per step member
    (None where a step leaves an optional member out; spends as floats, as the model holds them).

    Built straight from the JSON when it provably matches (`_view_of_json`), else from the validated `SagaPlan`
    (`of_model`); both give the same values, so the rules report the same either way."""

    __slots__ = (
        "cap",
        "classes",
        "durations",
        "expires",
        "expires_at",
        "ids",
        "keys",
        "pivot",
        "saga_id",
        "spends",
        "tools",
        "ttls",
        "undos",
    )

    def __init__(  # positional: this runs once per plan validated
        self,
        saga_id: str,
        pivot: int,
        cap: float,
        expires_at: str,
        ids: list[str],
        tools: list[str],
        classes: list[str],
        undos: list[str | None],
        keys: list[str],
        ttls: list[int | None],
        spends: list[float | None],
        durations: list[int | None],
    ) -> None:
        self.saga_id = saga_id
        self.pivot = pivot
        self.cap = cap  # mandate.maxSpendEur
        self.expires_at = expires_at  # mandate.expiresAt as written
        self.expires = parse_ts(expires_at)
        self.ids = ids
        self.tools = tools
        self.classes = classes
        self.undos = undos  # compensation.tool
        self.keys = keys  # idempotencyKey
        self.ttls = ttls  # undoTtlSeconds
        self.spends = spends  # maxSpendEur
        self.durations = durations  # maxDurationSeconds

    @classmethod
    def of_model(cls, plan: SagaPlan) -> SagaView:
        steps = plan.steps
        return cls(
            plan.saga_id,
            plan.pivot_index,
            plan.mandate.max_spend_eur,
            plan.mandate.expires_at,
            [s.id for s in steps],
            [s.tool for s in steps],
            [s.step_class for s in steps],
            [None if s.compensation is None else s.compensation.tool for s in steps],
            [s.idempotency_key for s in steps],
            [s.undo_ttl_seconds for s in steps],
            [s.max_spend_eur for s in steps],
            [s.max_duration_seconds for s in steps],
        )


_CLASSES = frozenset({"compensable", "retriable", "irreversible"})
_EXACT = 2**53  # an int up to this is the float the model's strict float field makes of it, exactly


def _encodable(text: str) -> bool:
    """Whether the model's string fields take `text`: a lone surrogate has no UTF-8 form, and the model refuses it."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _view_of_json(value: Any) -> SagaView | None:
    """The view of `value` read straight from the JSON when `SagaPlan` takes it for certain; None when not sure.

    Accepts only plain dicts, lists, strs, ints and floats that the model accepts unchanged (ints up to 2**53 in
    float fields, which it turns into the same floats): anything else, such as a member given by its Python name,
    a str subclass or a huge spend, goes to the model, which decides and explains. A member this format does not
    define, or a null one, shows as a length that does not add up. Written for speed: one pass, no calls per
    member."""
    if type(value) is not dict:
        return None
    try:
        saga_id, version, author = value["sagaId"], value["planVersion"], value["authoredBy"]
        signature, pivot, mandate, steps = value["signature"], value["pivotIndex"], value["mandate"], value["steps"]
        comment = value.get("$comment")
        if not (
            len(value) == 7 + (comment is not None)
            and (comment is None or (type(comment) is str and (comment.isascii() or _encodable(comment))))
            and type(saga_id) is str
            and saga_id
            and type(version) is int
            and version > 0
            and type(signature) is str
            and signature
            and type(pivot) is int
            and pivot >= 0
            and type(author) is dict
            and len(author) == 2
            and type(mandate) is dict
            and len(mandate) == 2
            and type(steps) is list
            and steps
        ):
            return None
        agent, model, cap, expires_at = author["agent"], author["model"], mandate["maxSpendEur"], mandate["expiresAt"]
        if not (type(agent) is str and agent and type(model) is str and model and type(expires_at) is str):
            return None
        if type(cap) is int and 0 <= cap <= _EXACT:
            cap = float(cap)
        elif type(cap) is not float or not cap >= 0:  # NaN fails too
            return None
        ids: list[str] = []
        tools: list[str] = []
        classes: list[str] = []
        undos: list[str | None] = []
        keys: list[str] = []
        ttls: list[int | None] = []
        spends: list[float | None] = []
        durations: list[int | None] = []
        for s in steps:
            if type(s) is not dict:
                return None
            sid, tool, cls, key = s["id"], s["tool"], s["class"], s["idempotencyKey"]
            if not (
                type(sid) is str
                and sid
                and type(tool) is str
                and tool
                and type(key) is str
                and key
                and type(cls) is str
                and cls in _CLASSES
            ):
                return None
            undo = ttl = spend = duration = None
            if len(s) > 4:
                comp, ttl = s.get("compensation"), s.get("undoTtlSeconds")
                spend, duration = s.get("maxSpendEur"), s.get("maxDurationSeconds")
                if len(s) != 4 + (comp is not None) + (ttl is not None) + (spend is not None) + (duration is not None):
                    return None  # an unknown or null member
                if comp is not None:
                    if type(comp) is not dict:
                        return None
                    undo, args = comp.get("tool"), comp.get("args")
                    if not (
                        type(undo) is str
                        and undo
                        and len(comp) == 1 + (args is not None)
                        and (undo.isascii() or _encodable(undo))
                    ):
                        return None
                    if args is not None:
                        if type(args) is not dict:
                            return None
                        for k in args:
                            if type(k) is not str:
                                return None
                if ttl is not None and not (type(ttl) is int and ttl > 0):
                    return None
                if duration is not None and not (type(duration) is int and duration >= 0):
                    return None
                if spend is not None:
                    if type(spend) is int and 0 <= spend <= _EXACT:
                        spend = float(spend)
                    elif type(spend) is not float or not spend >= 0:
                        return None
            ids.append(sid)
            tools.append(tool)
            classes.append(cls)
            undos.append(undo)
            keys.append(key)
            ttls.append(ttl)
            spends.append(spend)
            durations.append(duration)
        texts = "".join(ids + tools + keys) + saga_id + signature + agent + model
        if not (texts.isascii() or _encodable(texts)):
            return None
        # parse_ts refuses what the model's timestamp check refuses (ValueError)
        return SagaView(saga_id, pivot, cap, expires_at, ids, tools, classes, undos, keys, ttls, spends, durations)
    except (KeyError, ValueError):  # a required member missing, or a timestamp parse_ts refuses
        return None


def _keys_and_ids(view: SagaView) -> list[Violation]:
    """Schema-level refinements: unique step ids, and keys that start `<sagaId>:<stepId>` (as that validator's
    schema demands)."""
    ids, keys = view.ids, view.keys
    head = f"{view.saga_id}:"
    bases = [head + sid for sid in ids]
    shared = len(set(ids)) != len(ids)
    if bases == keys and not shared:
        return []  # every key is its two-part form and every id is its own
    out: list[Violation] = []
    seen: dict[str, int] = {}
    for i, sid in enumerate(ids):
        if shared:
            if sid in seen:
                out.append(
                    Violation(
                        rule="schema",
                        path=f"steps[{i}].id",
                        message=f'steps[{i}] reuses the id "{sid}" of steps[{seen[sid]}]: idempotency keys derive '
                        f"from step ids, so two steps would share one. Give each step its own id.",
                    )
                )
            seen.setdefault(sid, i)
        base, key = bases[i], keys[i]
        if key == base:
            continue
        if not key.startswith(base + ":"):
            out.append(
                Violation(
                    rule="schema",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{sid}" carries idempotencyKey "{key}", but a key is derived as '
                    f'"<sagaId>:<stepId>[:<sha256>]". Use "{base}" or "{base}:<sha256 of the step>".',
                )
            )
        elif not _HEX64.fullmatch(key[len(base) + 1 :]):
            out.append(
                Violation(
                    rule="schema",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{sid}" carries idempotencyKey "{key}": what follows "{base}:" must be a sha256 '
                    f'as 64 lowercase hex digits. Use "{base}" or "{base}:<sha256 of the step>".',
                )
            )
    return out


def check_pivot_ordering(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-2 (`pivot-ordering`)."""
    classes = view.classes
    n, p = len(classes), view.pivot
    if p >= n:
        return [
            Violation(
                rule="pivot-ordering",
                path="pivotIndex",
                message=f"pivotIndex is {p}, but the saga has {n} steps (indices 0..{n - 1}): the pivot must be a real "
                f"step. Point pivotIndex at the first irreversible step.",
            )
        ]
    if classes[:p].count("compensable") == p == classes.count("compensable"):
        return []  # every step before the pivot is compensable and none after it: nothing to name
    out: list[Violation] = []
    ids, tools = view.ids, view.tools
    for i, c in enumerate(classes):
        if i < p and c != "compensable":
            out.append(
                Violation(
                    rule="pivot-ordering",
                    path=f"steps[{i}].class",
                    message=f'Step "{ids[i]}" ({tools[i]}) is {c} but comes before the pivot (index {p}): if a '
                    f"later step fails it cannot be undone. Make it compensable, or move it to or past the pivot.",
                )
            )
        elif i >= p and c == "compensable":
            out.append(
                Violation(
                    rule="pivot-ordering",
                    path=f"steps[{i}].class",
                    message=f'Step "{ids[i]}" ({tools[i]}) is compensable but sits at or after the pivot (index {p}), '
                    f"where nothing is rolled back: its compensation would never run. Move it before the pivot, or "
                    f"class it retriable or irreversible.",
                )
            )
    return out


def check_class_coherence(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-3 (`class-coherence`)."""
    classes, undos = view.classes, view.undos
    shipped = list(compress(classes, undos))  # the classes of the steps that ship a compensation (a tool is never "")
    if "irreversible" not in shipped and shipped.count("compensable") == classes.count("compensable"):
        return []  # no irreversible step ships an undo and every compensable one does
    out: list[Violation] = []
    ids, tools = view.ids, view.tools
    for i, (c, undo) in enumerate(zip(classes, undos, strict=True)):
        if c == "irreversible" and undo is not None:
            out.append(
                Violation(
                    rule="class-coherence",
                    path=f"steps[{i}].compensation",
                    message=f'Step "{ids[i]}" ({tools[i]}) claims irreversible and also ships an undo '
                    f"({undo}): it is lying about one of them. Drop the compensation, or class it "
                    f"compensable.",
                )
            )
        elif c == "compensable" and undo is None:
            out.append(
                Violation(
                    rule="class-coherence",
                    path=f"steps[{i}].compensation",
                    message=f'Step "{ids[i]}" ({tools[i]}) claims compensable but ships no compensation: a step that '
                    f"can be undone must say how. Declare compensation {{tool, args}}, or class it differently.",
                )
            )
    return out


def _eur(x: float) -> str:
    return f"{x:g} EUR"


def check_mandate(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-4 (`mandate`): each step and all steps together within maxSpendEur; the mandate not expired."""
    cap, spends = view.cap, view.spends
    out: list[Violation] = []
    if spends.count(None) != len(spends):  # some step declares a spend
        spent = [x for x in spends if x is not None]
        if max(spent) > cap:  # spends are never NaN: some step alone is over the cap
            for i, x in enumerate(spends):
                if x is not None and x > cap:
                    out.append(
                        Violation(
                            rule="mandate",
                            path=f"steps[{i}].maxSpendEur",
                            message=f'Step "{view.ids[i]}" ({view.tools[i]}) may spend {_eur(x)}, over the '
                            f"mandate's {_eur(cap)}. Lower the step's spend, or ask the principal for a larger "
                            f"mandate.",
                        )
                    )
        if not out:
            total = sum(spent)
            if total > cap:
                parts = " + ".join(f"{sid} {x:g}" for sid, x in zip(view.ids, spends, strict=True) if x is not None)
                out.append(
                    Violation(
                        rule="mandate",
                        path="mandate.maxSpendEur",
                        message=f"Together the steps may spend {_eur(total)} ({parts}), over the mandate's "
                        f"{_eur(cap)}, though each alone fits. Lower the spends by {_eur(total - cap)}, or ask for a "
                        f"larger mandate.",
                    )
                )
    if view.expires <= now:
        out.append(
            Violation(
                rule="mandate",
                path="mandate.expiresAt",
                message=f"The mandate expired at {view.expires_at} and it is now "
                f"{now.strftime('%Y-%m-%dT%H:%M:%SZ')}: the plan must not outlive it. Ask the principal for a new "
                f"mandate.",
            )
        )
    return out


def _parts(view: SagaView, first: int, last: int) -> str:
    """`s1 30s + s2 14400s + ...`: the declared durations of steps first..last, at most _PARTS_SHOWN named."""
    ids, durations = view.ids, view.durations
    named = [
        f"{ids[j]} {durations[j]}s"
        for j in range(first, min(last, first + _PARTS_SHOWN - 1) + 1)
        if durations[j] is not None
    ]
    rest = last - first + 1 - min(last - first + 1, _PARTS_SHOWN)
    return " + ".join(named) + (f" + {rest} more steps" if rest else "")


def check_undo_ttl(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-5 (`undo-ttl`): each undo window outlasts the worst case from its step's end to the pivot's end.

    Linear in the steps: the declared durations from each step to the pivot come from one suffix sum, each
    unbounded step is reported once, and messages name a bounded number of steps. A window that the declared
    durations alone already blow is reported too, even when an unbounded step on its path is also reported."""
    p, ttls = view.pivot, view.ttls
    if p >= len(ttls):
        return []  # pivot-ordering owns this failure
    if ttls[:p].count(None) == p:
        return []  # no step before the pivot declares an undo window
    classes, durations, ids, tools = view.classes, view.durations, view.ids, view.tools
    windows = [i for i in range(p) if ttls[i] is not None and classes[i] == "compensable"]
    first = windows[0] if windows else p
    # after[i]: declared seconds of steps i+1..p; unbounded_after[i]: the first unbounded step in i+1..p, or None.
    # Only i >= first is read.
    after = [0] * (p + 1)
    unbounded_after: list[int | None] = [None] * (p + 1)
    for i in range(p - 1, first - 1, -1):
        d = durations[i + 1]
        after[i] = after[i + 1] + (d or 0)
        unbounded_after[i] = i + 1 if d is None else unbounded_after[i + 1]
    out: list[Violation] = []
    if windows:
        ttl = ttls[first]
        for j in range(first + 1, p + 1):
            if durations[j] is not None:
                continue
            # the first window whose path holds step j is the one named; every window before j is blown by it
            if j < p:
                fix = f'Declare maxDurationSeconds on "{ids[j]}", or move the human step past the pivot.'
            else:
                fix = f'Declare maxDurationSeconds on the pivot "{ids[j]}".'
            out.append(
                Violation(
                    rule="undo-ttl",
                    path=f"steps[{j}].maxDurationSeconds",
                    message=f'Step "{ids[j]}" ({tools[j]}) declares no maxDurationSeconds: its worst-case duration '
                    f'is unbounded, so the {ttl}s undo window of "{ids[first]}" ({tools[first]}) cannot be '
                    f'shown to last until the pivot "{ids[p]}" ends. {fix}',
                )
            )
    for i in windows:
        ttl = ttls[i] or 0
        worst = after[i]
        if worst <= ttl:
            continue
        bounded = unbounded_after[i] is None
        parts = _parts(view, i + 1, p)
        at_least = "" if bounded else "at least "
        out.append(
            Violation(
                rule="undo-ttl",
                path=f"steps[{i}].undoTtlSeconds",
                message=f'The undo of "{ids[i]}" ({tools[i]}) works for {ttl}s, but from its end to the '
                f'end of the pivot "{ids[p]}" can take {at_least}{worst}s ({parts}): the rollback could expire '
                f"before the saga knows it needs it. Lengthen undoTtlSeconds to at least {worst}, shorten those "
                f"steps, or move the step closer to the pivot.",
            )
        )
    if len(out) > 1:
        out.sort(key=lambda v: _step_index(v.path))
    return out


def _step_index(path: str) -> int:
    return int(path[len("steps[") : path.index("]")])


def check_key_integrity(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-6 (`key-integrity`): a three-part key's hash is the hash of the step's canonical bytes."""
    out: list[Violation] = []
    raw_steps = raw["steps"]
    saga_id = view.saga_id
    shortest = len(saga_id) + 2  # a key `<sagaId>:<stepId>:...` is at least this much longer than its step id
    for i, (sid, key) in enumerate(zip(view.ids, view.keys, strict=True)):
        if len(key) < len(sid) + shortest:
            continue  # a two-part key claims no hash
        prefix = f"{saga_id}:{sid}:"
        if not key.startswith(prefix):
            continue
        claimed, tool = key[len(prefix) :], view.tools[i]
        try:
            actual = step_key_hash(raw_steps[i])
        except CanonicalError as exc:  # fail closed: a claim that cannot be checked is not a kept claim
            out.append(
                Violation(
                    rule="key-integrity",
                    path=f"steps[{i}].idempotencyKey",
                    message=f'Step "{sid}" ({tool}) claims the key hash "{claimed}", but the step has no exact '
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
                    message=f'Step "{sid}" ({tool}) carries the key hash "{claimed}", but the step\'s canonical '
                    f'bytes hash to "{actual}": same key, different bytes, exactly the replay the key exists to '
                    f'catch. Recompute the key as "{prefix}{actual}", or restore the step it was computed over.',
                )
            )
    return out


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
    reports every schema violation (or, where it takes the plan after all, gives the same view)."""
    view = _view_of_json(value)
    if view is None:
        plan, errors = schema_violations(SagaPlan, value)
        if not isinstance(plan, SagaPlan):
            return errors
        view = SagaView.of_model(plan)
    refinements = _keys_and_ids(view)
    if refinements:
        return refinements
    out: list[Violation] = []
    for _name, check in SAGA_CHECKS:
        out.extend(check(view, value, now))
    return out

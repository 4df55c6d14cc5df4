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
from its JSON, in one pass that takes only what the model takes (`_view_of_json`); anything that pass is not sure
of goes to the model, which reports exactly as before or, taking the plan after all, hands its members back to the
same reader. The rules run on what that reader gives (`SagaView`), whichever way it came. tests/core/validate/
test_saga.py holds the model path as the oracle: the same violations (rule, path, message) on generated near-valid
sagas, and the same values read.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from hatp_mcp.core.evidence.canonical import CanonicalError, canonical
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.validate.violation import Violation, schema_violations, violation

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
    body = dict(step)  # a copy, then the key out: a third of a comprehension's cost
    body.pop("idempotencyKey", None)
    return hashlib.sha256(canonical(body, allow_floats=True)).hexdigest()


class SagaView:
    """A plan that matches the schema, as the rules read it: its members, its steps as JSON objects (every member
    checked), and a few summaries taken in the same pass, so that a rule with nothing to report sees so without
    walking the steps again.

    One reader builds it (`_view_of_json`), from the JSON itself when that provably matches, else from the members
    the validated `SagaPlan` holds (`_json_of_model`), so the rules read the same values either way."""

    __slots__ = (
        "cap",
        "classes",
        "expires",
        "expires_at",
        "ids",
        "odd_keys",
        "pivot",
        "saga_id",
        "shipped",
        "spent",
        "steps",
        "windows",
    )

    def __init__(  # positional: this runs once per plan validated
        self,
        saga_id: str,
        pivot: int,
        cap: float,
        expires_at: str,
        steps: list[dict[str, Any]],
        ids: list[str],
        classes: list[str],
        shipped: list[str],
        odd_keys: list[int],
        windows: list[int],
        spent: list[float],
    ) -> None:
        self.saga_id = saga_id
        self.pivot = pivot
        self.cap = cap  # mandate.maxSpendEur, as a float
        self.expires_at = expires_at  # mandate.expiresAt as written
        self.expires = parse_ts(expires_at)
        self.steps = steps
        self.ids = ids  # each step's id
        self.classes = classes  # each step's class
        self.shipped = shipped  # the class of each step that ships a compensation, in step order
        self.odd_keys = odd_keys  # the steps whose idempotencyKey is not `<sagaId>:<id>`
        self.windows = windows  # the compensable steps before the pivot that declare undoTtlSeconds
        self.spent = spent  # each maxSpendEur declared, as a float, in step order


_CLASSES = frozenset({"compensable", "retriable", "irreversible"})
_EXACT = 2**53  # an int up to this is the float the model's strict float field makes of it, exactly


def _spend(step: dict[str, Any]) -> float | None:
    """A step's maxSpendEur as the model holds it: a float (an int in the JSON is exact up to 2**53)."""
    x = step.get("maxSpendEur")
    return None if x is None else float(x)


def _view_of_json(value: Any) -> SagaView | None:
    """The view of `value` when `SagaPlan` takes it for certain; None when not sure (the model then decides).

    Takes only plain dicts, lists, strs, ints and floats that the model takes as they are (ints up to 2**53 in
    float fields, which it turns into the same floats): anything else, such as a member given by its Python name,
    a str subclass or a huge spend, goes to the model, which decides and explains. A member this format does not
    define, or a null one, shows as a length that does not add up. Written for speed: one pass over the steps,
    no call per member."""
    if type(value) is not dict:
        return None
    try:
        saga_id, version, author = value["sagaId"], value["planVersion"], value["authoredBy"]
        signature, pivot, mandate, steps = value["signature"], value["pivotIndex"], value["mandate"], value["steps"]
        if len(value) != 7:
            comment = value["$comment"]
            # a lone surrogate has no UTF-8 form and the model refuses it: encode raises UnicodeEncodeError
            if not (len(value) == 8 and type(comment) is str and (comment.isascii() or comment.encode())):
                return None
        if not (
            type(saga_id) is str
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
        head = saga_id + ":"
        ids: list[str] = []
        classes: list[str] = []
        shipped: list[str] = []
        odd_keys: list[int] = []
        windows: list[int] = []
        spent: list[float] = []
        texts = [saga_id, signature, agent, model]
        for s in steps:  # the step's index is len(ids)
            if type(s) is not dict:
                return None
            sid = s["id"]
            tool = s["tool"]
            cls = s["class"]
            key = s["idempotencyKey"]
            if not (
                type(sid) is str
                and sid
                and type(tool) is str
                and tool
                and type(key) is str
                and type(cls) is str
                and cls in _CLASSES
            ):
                return None
            n = len(s)
            if n != 4:
                comp = s.get("compensation")
                ttl = s.get("undoTtlSeconds")
                spend = s.get("maxSpendEur")
                duration = s.get("maxDurationSeconds")
                if n != 4 + (comp is not None) + (ttl is not None) + (spend is not None) + (duration is not None):
                    return None  # an unknown or null member
                if comp is not None:
                    if type(comp) is not dict:
                        return None
                    undo = comp["tool"]
                    if not (type(undo) is str and undo):
                        return None
                    if len(comp) != 1:
                        args = comp["args"]
                        if not (type(args) is dict and len(comp) == 2):
                            return None
                        for k in args:
                            if type(k) is not str:
                                return None
                    texts.append(undo)
                    shipped.append(cls)
                if ttl is not None:
                    if not (type(ttl) is int and ttl > 0):
                        return None
                    if len(ids) < pivot and cls == "compensable":  # a window that undo-ttl must prove
                        windows.append(len(ids))
                if duration is not None and not (type(duration) is int and duration >= 0):
                    return None
                if spend is not None:
                    if type(spend) is int and 0 <= spend <= _EXACT:
                        spent.append(float(spend))
                    elif type(spend) is float and spend >= 0:
                        spent.append(spend)
                    else:
                        return None
            if key != head + sid:  # else the key's text is checked with the saga's id and the step's
                if not key:
                    return None
                odd_keys.append(len(ids))
                texts.append(key)
            ids.append(sid)
            classes.append(cls)
            texts.append(tool)
        text = "".join(ids) + "".join(texts)
        if not (text.isascii() or text.encode()):
            return None
        # parse_ts refuses (ValueError) what the model's timestamp check refuses
        return SagaView(saga_id, pivot, cap, expires_at, steps, ids, classes, shipped, odd_keys, windows, spent)
    except (KeyError, ValueError):  # a required member missing, a lone surrogate, a timestamp parse_ts refuses
        return None


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


def _keys_and_ids(view: SagaView) -> list[Violation]:
    """Schema-level refinements: unique step ids, and keys that start `<sagaId>:<stepId>` (as that validator's
    schema demands)."""
    ids = view.ids
    shared = len(set(ids)) != len(ids)
    if not shared and not view.odd_keys:
        return []  # every id is its own and every key is `<sagaId>:<id>`
    out: list[Violation] = []
    seen: dict[str, int] = {}
    head = f"{view.saga_id}:"
    steps = view.steps
    # every step when ids are shared (each reuse names the first); else only the steps whose key is not the id's
    for i in range(len(ids)) if shared else view.odd_keys:
        sid = ids[i]
        if sid in seen:
            out.append(
                violation(
                    "schema",
                    f"steps[{i}].id",
                    f'steps[{i}] reuses the id "{sid}" of steps[{seen[sid]}]: idempotency keys derive '
                    f"from step ids, so two steps would share one. Give each step its own id.",
                )
            )
        seen.setdefault(sid, i)
        base, key = head + sid, steps[i]["idempotencyKey"]
        if key == base:
            continue
        if not key.startswith(base + ":"):
            out.append(
                violation(
                    "schema",
                    f"steps[{i}].idempotencyKey",
                    f'Step "{sid}" carries idempotencyKey "{key}", but a key is derived as '
                    f'"<sagaId>:<stepId>[:<sha256>]". Use "{base}" or "{base}:<sha256 of the step>".',
                )
            )
        elif not _HEX64.fullmatch(key[len(base) + 1 :]):
            out.append(
                violation(
                    "schema",
                    f"steps[{i}].idempotencyKey",
                    f'Step "{sid}" carries idempotencyKey "{key}": what follows "{base}:" must be a sha256 '
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
            violation(
                "pivot-ordering",
                "pivotIndex",
                f"pivotIndex is {p}, but the saga has {n} steps (indices 0..{n - 1}): the pivot must be a real "
                f"step. Point pivotIndex at the first irreversible step.",
            )
        ]
    if classes[:p].count("compensable") == p == classes.count("compensable"):
        return []  # every step before the pivot is compensable and none after it: nothing to name
    out: list[Violation] = []
    steps = view.steps
    for i, c in enumerate(classes):
        if i < p and c != "compensable":
            s = steps[i]
            out.append(
                violation(
                    "pivot-ordering",
                    f"steps[{i}].class",
                    f'Step "{s["id"]}" ({s["tool"]}) is {c} but comes before the pivot (index {p}): if a '
                    f"later step fails it cannot be undone. Make it compensable, or move it to or past the pivot.",
                )
            )
        elif i >= p and c == "compensable":
            s = steps[i]
            out.append(
                violation(
                    "pivot-ordering",
                    f"steps[{i}].class",
                    f'Step "{s["id"]}" ({s["tool"]}) is compensable but sits at or after the pivot (index '
                    f"{p}), where nothing is rolled back: its compensation would never run. Move it before the "
                    f"pivot, or class it retriable or irreversible.",
                )
            )
    return out


def check_class_coherence(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-3 (`class-coherence`)."""
    classes, shipped = view.classes, view.shipped
    if "irreversible" not in shipped and shipped.count("compensable") == classes.count("compensable"):
        return []  # no irreversible step ships an undo and every compensable one does
    out: list[Violation] = []
    for i, s in enumerate(view.steps):
        c, comp = classes[i], s.get("compensation")
        if c == "irreversible" and comp is not None:
            out.append(
                violation(
                    "class-coherence",
                    f"steps[{i}].compensation",
                    f'Step "{s["id"]}" ({s["tool"]}) claims irreversible and also ships an undo '
                    f"({comp['tool']}): it is lying about one of them. Drop the compensation, or class it "
                    f"compensable.",
                )
            )
        elif c == "compensable" and comp is None:
            out.append(
                violation(
                    "class-coherence",
                    f"steps[{i}].compensation",
                    f'Step "{s["id"]}" ({s["tool"]}) claims compensable but ships no compensation: a step '
                    f"that can be undone must say how. Declare compensation {{tool, args}}, or class it differently.",
                )
            )
    return out


def _eur(x: float) -> str:
    return f"{x:g} EUR"


def check_mandate(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-4 (`mandate`): each step and all steps together within maxSpendEur; the mandate not expired."""
    cap, spent = view.cap, view.spent
    out: list[Violation] = []
    if spent:
        if max(spent) > cap:  # spends are never NaN: some step alone is over the cap
            for i, s in enumerate(view.steps):
                x = _spend(s)
                if x is not None and x > cap:
                    out.append(
                        violation(
                            "mandate",
                            f"steps[{i}].maxSpendEur",
                            f'Step "{s["id"]}" ({s["tool"]}) may spend {_eur(x)}, over the mandate\'s '
                            f"{_eur(cap)}. Lower the step's spend, or ask the principal for a larger mandate.",
                        )
                    )
        if not out:
            total = sum(spent)
            if total > cap:
                parts = " + ".join(f"{s['id']} {x:g}" for s in view.steps if (x := _spend(s)) is not None)
                out.append(
                    violation(
                        "mandate",
                        "mandate.maxSpendEur",
                        f"Together the steps may spend {_eur(total)} ({parts}), over the mandate's "
                        f"{_eur(cap)}, though each alone fits. Lower the spends by {_eur(total - cap)}, or ask for a "
                        f"larger mandate.",
                    )
                )
    if view.expires <= now:
        out.append(
            violation(
                "mandate",
                "mandate.expiresAt",
                f"The mandate expired at {view.expires_at} and it is now "
                f"{now.strftime('%Y-%m-%dT%H:%M:%SZ')}: the plan must not outlive it. Ask the principal for a new "
                f"mandate.",
            )
        )
    return out


def _parts(steps: list[dict[str, Any]], first: int, last: int) -> str:
    """`s1 30s + s2 14400s + ...`: the declared durations of steps first..last, at most _PARTS_SHOWN named."""
    named = [
        f"{steps[j]['id']} {d}s"
        for j in range(first, min(last, first + _PARTS_SHOWN - 1) + 1)
        if (d := steps[j].get("maxDurationSeconds")) is not None
    ]
    rest = last - first + 1 - min(last - first + 1, _PARTS_SHOWN)
    return " + ".join(named) + (f" + {rest} more steps" if rest else "")


def check_undo_ttl(view: SagaView, raw: dict[str, Any], now: datetime) -> list[Violation]:
    """HATP-SAGA-5 (`undo-ttl`): each undo window outlasts the worst case from its step's end to the pivot's end.

    Linear in the steps: the declared durations from each step to the pivot come from one suffix sum, each
    unbounded step is reported once, and messages name a bounded number of steps. A window that the declared
    durations alone already blow is reported too, even when an unbounded step on its path is also reported."""
    p, steps = view.pivot, view.steps
    if p >= len(steps):
        return []  # pivot-ordering owns this failure
    windows = view.windows  # the compensable steps before the pivot that declare a window, in step order
    if not windows:
        return []  # no window to outlast
    # One backward pass over the steps after the first window up to the pivot: the unbounded steps, and for each
    # window (the last first) the declared seconds from its end to the pivot's end and whether all are bounded.
    first = windows[0]
    unbounded: list[int] = []
    worst: list[tuple[int, bool]] = []
    k, declared = len(windows) - 1, 0
    at = windows[k]
    for j in range(p, first, -1):
        d = steps[j].get("maxDurationSeconds")
        if d is None:
            unbounded.append(j)
        else:
            declared += d
        if j - 1 == at:  # window indices are distinct: at most one ends here
            worst.append((declared, not unbounded))
            k -= 1
            at = windows[k] if k >= 0 else -1
    out: list[Violation] = []
    pivot = steps[p]
    if unbounded:
        opener = steps[first]
        window = (
            f'is unbounded, so the {opener["undoTtlSeconds"]}s undo window of "{opener["id"]}" ({opener["tool"]}) '
            f'cannot be shown to last until the pivot "{pivot["id"]}" ends.'
        )
        for j in reversed(unbounded):
            # the first window whose path holds step j is the one named; every window before j is blown by it
            s = steps[j]
            if j < p:
                fix = f'Declare maxDurationSeconds on "{s["id"]}", or move the human step past the pivot.'
            else:
                fix = f'Declare maxDurationSeconds on the pivot "{s["id"]}".'
            out.append(
                violation(
                    "undo-ttl",
                    f"steps[{j}].maxDurationSeconds",
                    f'Step "{s["id"]}" ({s["tool"]}) declares no maxDurationSeconds: its worst-case duration '
                    f"{window} {fix}",
                )
            )
    for i in windows:
        seconds, bounded = worst.pop()  # worst holds the last window first
        s = steps[i]
        ttl = s["undoTtlSeconds"]
        if seconds > ttl:
            at_least = "" if bounded else "at least "
            out.append(
                violation(
                    "undo-ttl",
                    f"steps[{i}].undoTtlSeconds",
                    f'The undo of "{s["id"]}" ({s["tool"]}) works for {ttl}s, but from its end to the end of '
                    f'the pivot "{pivot["id"]}" can take {at_least}{seconds}s ({_parts(steps, i + 1, p)}): the '
                    f"rollback could expire before the saga knows it needs it. Lengthen undoTtlSeconds to at least "
                    f"{seconds}, shorten those steps, or move the step closer to the pivot.",
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
    for i in view.odd_keys:  # a key that is `<sagaId>:<id>` claims no hash
        s = view.steps[i]
        prefix = f"{view.saga_id}:{s['id']}:"
        key = s["idempotencyKey"]
        if not key.startswith(prefix):
            continue
        claimed = key[len(prefix) :]
        try:
            actual = step_key_hash(raw_steps[i])
        except CanonicalError as exc:  # fail closed: a claim that cannot be checked is not a kept claim
            out.append(
                violation(
                    "key-integrity",
                    f"steps[{i}].idempotencyKey",
                    f'Step "{s["id"]}" ({s["tool"]}) claims the key hash "{claimed}", but the step has no '
                    f"exact RFC 8785 form ({exc.reason} at steps[{i}]{exc.path[1:]}), so the claim cannot be "
                    f"checked. {exc.fix or 'Remove that value'}, then recompute the key.",
                )
            )
            continue
        if claimed != actual:
            out.append(
                violation(
                    "key-integrity",
                    f"steps[{i}].idempotencyKey",
                    f'Step "{s["id"]}" ({s["tool"]}) carries the key hash "{claimed}", but the step\'s '
                    f'canonical bytes hash to "{actual}": same key, different bytes, exactly the replay the key '
                    f'exists to catch. Recompute the key as "{prefix}{actual}", or restore the step it was computed '
                    f"over.",
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

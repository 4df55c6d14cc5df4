"""The saga rules (HATP-SAGA-2..6, and the schema refinements of HATP-SAGA-1 the JSON schema cannot state), over
what the reader gives (`SagaView`, saga_view.py). Pure: `now` is an argument.

saga.py lists them in the order they report (`SAGA_CHECKS`) and runs them. This module knows no pydantic, so that
it is compiled with the reader (mypyc, setup.py); the same file runs as Python where no compiled module was built.
Annotations here are enforced when compiled: the plan as received (`raw`) stays `Any`.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.canonical import CanonicalError, canonical
from hatp_mcp.core.validate.saga_view import SagaView, _spend
from hatp_mcp.core.validate.violation import Violation, violation

__all__ = [
    "check_class_coherence",
    "check_key_integrity",
    "check_mandate",
    "check_pivot_ordering",
    "check_undo_ttl",
    "step_key_hash",
]

_HEX64 = re.compile(r"[0-9a-f]{64}")
# How many steps a message names when it explains a sum; the rest are counted. Output stays linear in the steps.
_PARTS_SHOWN = 6


def step_key_hash(step: Any) -> str:
    """sha256 hex of the RFC 8785 form of a step as received, without its own `idempotencyKey` member."""
    body = dict(step)  # a copy, then the key out: cheaper than a comprehension
    body.pop("idempotencyKey", None)
    return hashlib.sha256(canonical(body, allow_floats=True)).hexdigest()


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


def check_pivot_ordering(view: SagaView, raw: Any, now: datetime) -> list[Violation]:
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


def check_class_coherence(view: SagaView, raw: Any, now: datetime) -> list[Violation]:
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


def check_mandate(view: SagaView, raw: Any, now: datetime) -> list[Violation]:
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
                f"The mandate expired at {when_words(view.expires_at, now)}: the plan must not outlive it. Ask the"
                " principal for a new mandate.",
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


def check_undo_ttl(view: SagaView, raw: Any, now: datetime) -> list[Violation]:
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


def check_key_integrity(view: SagaView, raw: Any, now: datetime) -> list[Violation]:
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

"""Which wire objects validation made: a mark a model's after-validator sets on each object it validates, so that a
verifier handed that object may skip validating its wire form again (hatp_mcp/core/gateway/proof.py, agents.py).

An object validation made holds what validation would make of its own wire form (tests prove it of each marked
model, tests/core/model/test_validated.py); one made any other way (`model_copy(update=...)`, `model_construct`,
`copy`) is never marked and gets the whole check. Like a Plan, a wire object is never changed in place: frozen
models, and nobody mutates their JSON members. A mark lives exactly as long as its object (a weak reference's
callback drops it before the id can be reused). Pure: no IO.
"""

from __future__ import annotations

import weakref
from functools import partial

__all__ = ["mark_validated", "was_validated"]

_MADE: dict[int, weakref.ref[object]] = {}


def mark_validated(obj: object) -> None:
    """Mark `obj` as made by validation. Call it only from the model's own after-validator."""
    key = id(obj)
    _MADE[key] = weakref.ref(obj, partial(_forget, _MADE, key))


def was_validated(obj: object) -> bool:
    """Whether validation made this very object (not an equal one, not a copy)."""
    ref = _MADE.get(id(obj))
    return ref is not None and ref() is obj


def _forget(made: dict[int, weakref.ref[object]], key: int, ref: weakref.ref[object]) -> None:
    # `made` is bound when the mark is set, so this still works while the interpreter tears modules down
    if made.get(key) is ref:  # not a newer object's mark under a reused id
        del made[key]

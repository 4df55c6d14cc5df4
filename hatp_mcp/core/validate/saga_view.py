"""The saga reader: a plan that matches the schema, read straight from its JSON, as the rules read it. Pure.

`_view_of_json` takes a plan's JSON in one pass and gives a `SagaView` only when the schema models of saga.py
(`SagaPlan`) take it for certain; for anything else it gives None, and saga.py asks the models. This module knows no
pydantic, so that it is compiled (mypyc, setup.py): the step loop is most of what a clean plan costs. The same file
runs as Python where no compiled module was built. Annotations here are enforced when compiled: a value the reader
has not checked yet stays `Any`.
"""

from __future__ import annotations

from typing import Any

from hatp_mcp.core.model.base import parse_ts

__all__ = ["SagaView"]


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

"""A violation found by the static validator: the rule it breaks, where, and what to do. Pure data, no IO."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError

from hatp_mcp.core.model.wire import error_path, explain

__all__ = ["Check", "Violation", "schema_violations", "violation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """One broken rule.

    `rule` is the rule id (HATP-VAL-n for HATP plans; the apology-protocol name such as `undo-ttl` for saga
    artifacts; `schema` for input that does not match its schema). `path` is a JSON path into the input
    (`branches[2].amount`, `$` for the whole document). `message` says what is wrong in the plan's own numbers
    and what to do instead.
    """

    rule: str
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "path": self.path, "message": self.message}


_new = object.__new__
# The slots' own setters: they write a field of a frozen instance without going through its __setattr__.
_set_rule, _set_path, _set_message = (Violation.__dict__[f].__set__ for f in ("rule", "path", "message"))


def violation(rule: str, path: str, message: str) -> Violation:
    """`Violation(rule=rule, path=path, message=message)`, for validators that report in a hot loop: the frozen
    dataclass's `__init__` sets each field through `object.__setattr__`, these through the slots' own setters. The
    result is the same frozen Violation: equal, hashed and printed alike."""
    v = _new(Violation)
    _set_rule(v, rule)
    _set_path(v, path)
    _set_message(v, message)
    return v


Check = Callable[[Any, datetime], list[Violation]]


def schema_violations(model: type[BaseModel], value: Any) -> tuple[BaseModel | None, list[Violation]]:
    """Validate `value` as `model`: the instance, or None and every schema error as a `schema` violation."""
    try:
        return model.model_validate(value), []
    except ValidationError as exc:
        out: list[Violation] = []
        for err in exc.errors(include_url=False):
            out.append(Violation(rule="schema", path=error_path(tuple(err["loc"])), message=explain(err, model)))
        return None, out

"""A tool the journal can run and undo: `undoable(name, execute, undo, lookup=None)`.

The tool author's contract (spec/journal.md):
- `execute(args, key)` does the effect and returns its output (JSON data). Raising means it did not happen; raise
  `OutcomeUnknown` when you cannot tell (the step is then in doubt, HATP-JRN-6). The same `key` twice is one effect.
- `undo(args, output, key)` undoes it; the same `key` on every retry, so an undo made twice with it is one undo.
  Raising is a failed attempt (retried, bounded); raise `UndoRefused` when retrying cannot help.
- `lookup(args, key)` answers whether the call with that key happened: `Happened(output)`, `DidNotHappen()`, or
  None when it cannot tell. Without a lookup, a step whose result was lost is left for a person (a dead letter).
- `pivot=True`: the step cannot be undone, and rollback stops at it (HATP-JRN-5).
No protocol logic here: this is what a tool declares.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DidNotHappen",
    "Execute",
    "Happened",
    "LookupFn",
    "OutcomeUnknown",
    "Undo",
    "UndoRefused",
    "Undoable",
    "undoable",
]


class OutcomeUnknown(Exception):
    """Raised by `execute` when it cannot tell whether its effect happened (a timeout to its own API, say)."""


class UndoRefused(Exception):
    """Raised by `undo` when retrying cannot help (the undo is not allowed, the target refuses it for good): the
    step's rollback fails at once, a dead letter says why (HATP-JRN-8)."""


@dataclass(frozen=True, slots=True)
class Happened:
    output: Any = None


@dataclass(frozen=True, slots=True)
class DidNotHappen:
    pass


Execute = Callable[[dict[str, Any], str], Awaitable[Any]]
Undo = Callable[[dict[str, Any], Any, str], Awaitable[Any]]
LookupFn = Callable[[dict[str, Any], str], Awaitable[Happened | DidNotHappen | None]]


@dataclass(frozen=True, slots=True)
class Undoable:
    name: str
    execute: Execute
    undo: Undo | None = None
    lookup: LookupFn | None = None
    pivot: bool = False
    description: str = ""  # for agent frameworks: what the tool does
    schema: dict[str, Any] | None = None  # for agent frameworks: the JSON Schema of its arguments
    irreversible: bool = False  # it cannot be undone; rollback leaves it in place and says so (HATP-JRN-19)


def undoable(
    name: str,
    execute: Execute,
    undo: Undo | None = None,
    lookup: LookupFn | None = None,
    *,
    pivot: bool = False,
    description: str = "",
    schema: dict[str, Any] | None = None,
    irreversible: bool = False,
) -> Undoable:
    """Declare a tool. Raises ValueError for a pivot or an irreversible tool that declares an undo (neither can be
    undone), or one that is both."""
    if not name:
        raise ValueError("a tool needs a name")
    if (pivot or irreversible) and undo is not None:
        raise ValueError(f"tool {name!r}: a pivot or irreversible tool cannot be undone, so it declares no undo")
    if pivot and irreversible:
        raise ValueError(f"tool {name!r}: a pivot stops rollback; an irreversible tool does not: choose one")
    return Undoable(name, execute, undo, lookup, pivot, description, schema, irreversible)

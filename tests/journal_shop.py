"""A small shop for journal tests: mark an item returned, refund it, print a return label. Each effect and each
undo is idempotent on its key (a second call with the same key changes nothing) and is written to `effects`, so a
test can see exactly what ran and how often. With a path, every effect is appended to that file and fsynced, and
a shop opened on the same file knows what happened before (crash tests across processes).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hatp_mcp.runtime.journal.undoable import DidNotHappen, Happened, Undoable, undoable


class Shop:
    def __init__(self, path: Path | None = None, on_effect: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.on_effect = on_effect  # called after each effect is durable (crash tests stop the process there)
        self.effects: list[tuple[str, str]] = []  # (kind, key): mark, unmark, refund, unrefund
        self.calls: list[str] = []  # every call made, repeats included
        self.undo_failures: dict[str, int] = {}  # tool -> how many undo calls fail before one succeeds
        self.label_fails = True
        if path is not None and path.exists():
            self.effects = [tuple(line.split(" ", 1)) for line in path.read_text().splitlines()]  # type: ignore[misc]

    def _effect(self, kind: str, key: str) -> bool:
        """Record `kind` for `key` once; False when it had happened already (an idempotent repeat)."""
        if (kind, key) in self.effects:
            return False
        self.effects.append((kind, key))
        if self.path is not None:
            with self.path.open("a") as f:
                f.write(f"{kind} {key}\n")
                f.flush()
                os.fsync(f.fileno())
        if self.on_effect is not None:
            self.on_effect(f"{kind} {key}")
        return True

    def _call(self, what: str) -> None:
        """An undo call, repeats included; with a path, also written (durably) to `<path>.calls`."""
        self.calls.append(what)
        if self.path is not None:
            with self.path.with_suffix(".calls").open("a") as f:
                f.write(what + "\n")
                f.flush()
                os.fsync(f.fileno())

    def kinds(self) -> list[str]:
        return [k for k, _ in self.effects]

    def _fail_undo(self, tool: str) -> None:
        left = self.undo_failures.get(tool, 0)
        if left > 0:
            self.undo_failures[tool] = left - 1
            raise RuntimeError(f"{tool} undo: service unavailable")

    # -- the tools ------------------------------------------------------------------------------------------
    async def mark_returned(self, args: dict[str, Any], key: str) -> dict[str, Any]:
        self.calls.append(f"mark {key}")
        self._effect("mark", key)
        return {"item": args["item"], "status": "returned"}

    async def unmark(self, args: dict[str, Any], output: Any, key: str) -> dict[str, Any]:
        self._call(f"unmark {key}")
        self._fail_undo("mark_returned")
        self._effect("unmark", key)
        return {"item": args["item"], "status": "sold"}

    async def refund(self, args: dict[str, Any], key: str) -> dict[str, Any]:
        self.calls.append(f"refund {key}")
        self._effect("refund", key)
        return {"refundId": f"r-{key}", "usd": args["usd"]}

    async def unrefund(self, args: dict[str, Any], output: Any, key: str) -> dict[str, Any]:
        self._call(f"unrefund {key}")
        self._fail_undo("refund")
        self._effect("unrefund", key)
        return {"reversed": output["refundId"]}

    async def lookup_refund(self, args: dict[str, Any], key: str) -> Happened | DidNotHappen:
        if ("refund", key) in self.effects:
            return Happened({"refundId": f"r-{key}", "usd": args["usd"]})
        return DidNotHappen()

    async def lookup_mark(self, args: dict[str, Any], key: str) -> Happened | DidNotHappen:
        return (
            Happened({"item": args["item"], "status": "returned"}) if ("mark", key) in self.effects else DidNotHappen()
        )

    async def lookup_label(self, args: dict[str, Any], key: str) -> Happened | DidNotHappen:
        return Happened({"label": "LBL-1"}) if ("label", key) in self.effects else DidNotHappen()

    async def label(self, args: dict[str, Any], key: str) -> dict[str, Any]:
        self.calls.append(f"label {key}")
        if self.label_fails:
            raise RuntimeError("label service down")
        self._effect("label", key)
        return {"label": "LBL-1"}

    def tools(self) -> dict[str, Undoable]:
        return {
            "mark_returned": undoable("mark_returned", self.mark_returned, self.unmark, self.lookup_mark),
            "refund": undoable("refund", self.refund, self.unrefund, self.lookup_refund),
            "label": undoable("label", self.label, lookup=self.lookup_label),
        }

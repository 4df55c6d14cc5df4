"""The pytest plugin the mutation runner loads into each run (`-p tests.mutation.plugin`); inert otherwise.

With `HATP_MUTATION_PLAN` naming a JSON file `{"own": [[file, function], ...], "controls": [...], "out": path}`, it
keeps only those test functions, runs the controls (other rules' planted violations, which must still pass) first
and the rule's own after them, fast ones first, stops at the first failure of an own test (one is enough to kill
the mutant), and writes what ran and what failed to `out`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

_PLAN = "HATP_MUTATION_PLAN"


class _Run:
    def __init__(self, plan: dict[str, Any]) -> None:
        self.own = {tuple(x) for x in plan["own"]}
        self.controls = {tuple(x) for x in plan["controls"]} - self.own
        self.out = Path(plan["out"])
        self.kind: dict[str, str] = {}
        self.result: dict[str, list[str]] = {"own_run": [], "own_failed": [], "controls_run": [], "controls_failed": []}

    def key(self, item: pytest.Item) -> tuple[str, str]:
        rel = Path(str(item.path)).resolve().relative_to(Path.cwd().resolve())
        return str(rel), getattr(item, "originalname", item.name)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        own = [i for i in items if self.key(i) in self.own]
        controls = [i for i in items if self.key(i) in self.controls]
        own.sort(key=_slowness)
        controls.sort(key=_slowness)
        keep = set(map(id, own + controls))
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in keep])
        items[:] = controls + own
        self.kind = {i.nodeid: "own" for i in own} | {i.nodeid: "controls" for i in controls}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        kind = self.kind.get(report.nodeid)
        if kind is None:
            return
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.result[f"{kind}_run"].append(report.nodeid)
        if report.failed and report.nodeid not in self.result[f"{kind}_failed"]:
            self.result[f"{kind}_failed"].append(report.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        yield
        if self.kind.get(item.nodeid) == "own" and self.result["own_failed"]:
            item.session.shouldstop = "the mutant is killed"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.out.write_text(json.dumps(self.result))


def _slowness(item: pytest.Item) -> tuple[bool, bool]:
    """Pure-core tests first, real processes last (the order is otherwise the collection order)."""
    path = str(item.path)
    return item.get_closest_marker("e2e") is not None or "/e2e/" in path, "/core/" not in path


def pytest_configure(config: pytest.Config) -> None:
    plan = os.environ.get(_PLAN)
    if plan:
        config.pluginmanager.register(_Run(json.loads(Path(plan).read_text())), "hatp-mutation-run")

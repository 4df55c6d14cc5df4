"""`make bench` (bench/run.py) calls every bench module's main() with no argument: each must accept that."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import bench


def test_every_bench_main_runs_with_no_argument_as_make_bench_calls_it() -> None:
    names = [m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_") and m.name != "run"]
    assert "saga_reference" in names and "mcp_trip" in names  # the listing itself found the benches
    required = {}
    for name in names:
        main = importlib.import_module(f"bench.{name}").main
        params = inspect.signature(main).parameters.values()
        missing = [
            p.name
            for p in params
            if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if missing:
            required[name] = missing
    assert required == {}, f"bench.run calls main() bare, but these require arguments: {required}"

"""What the tests of the modules setup.py compiles with mypyc share, and what bench/_report.py prints its build from.

setup.py compiles the modules its COMPILED lists (`compiled_modules`, read from its source: importing setup.py would
run the build). Each has a test (tests/core/validate/test_saga_compiled.py and
tests/core/signing/test_canonical_compiled.py) that
- fails where the module imported is not the compiled one, or is a build older than its source (`build_state`): a
  build that silently fell back to Python (setup.py's fallback for a machine without a C compiler) would be correct
  and slow, and one older than its source would run old code;
- holds the compiled module to its own source, loaded by path under another name as plain Python (`load_as_python`),
  comparing what each gives or raises (`outcome`): compiled code is not quite Python (annotations are enforced, ints
  and floats are unboxed, a class is native), so the comparison runs on values where the two could part (`EDGES`,
  swapped into generated values by `edged`).
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import math
from collections.abc import Callable, Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from hypothesis import strategies as st

from hatp_mcp.errors import HatpError

ROOT = Path(__file__).resolve().parents[1]
REBUILD = "run `make install` (setup.py compiles it with mypyc; it needs a C compiler)"

__all__ = [
    "EDGES",
    "REBUILD",
    "Dict",
    "Float",
    "Int",
    "List",
    "Str",
    "build_problem",
    "build_state",
    "compiled_modules",
    "compiled_sources",
    "edged",
    "load_as_python",
    "nodes",
    "outcome",
    "source",
]


def _setup_value(name: str) -> Any:
    """A constant setup.py assigns, read from its source when asked, not on import: importing setup.py would run the
    build, and the mutation run's copy of the tree (tests/mutation/run.py) has no setup.py."""
    for node in ast.parse((ROOT / "setup.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise LookupError(f"setup.py assigns no {name}")


def compiled_sources() -> list[str]:
    """setup.py's COMPILED: the source files it compiles, relative to the project root."""
    return [str(path) for path in _setup_value("COMPILED")]


def compiled_modules() -> list[str]:
    """The dotted names of the modules setup.py compiles, in its order."""
    return [path.removesuffix(".py").replace("/", ".") for path in compiled_sources()]


def _package_dir(name: str) -> Path:
    """The directory of a package, from its __init__.py (which stays Python). Not a compiled module's own __file__:
    mypyc gives a module that another one of its library imports first a wrong one (the package path twice)."""
    init = importlib.import_module(name).__file__
    if init is None:
        raise LookupError(f"{name} has no __init__.py")
    return Path(init).parent


def _built(package: str, leaf: str) -> list[Path]:
    return [p for p in (_package_dir(package) / (leaf + s) for s in EXTENSION_SUFFIXES) if p.exists()]


def source(module: ModuleType) -> Path:
    package, _, leaf = module.__name__.rpartition(".")
    return _package_dir(package) / f"{leaf}.py"


def build_state(module: ModuleType) -> Literal["compiled", "Python", "stale"]:
    """`compiled` where the module imported is its mypyc build, and the library that holds the compiled code of the
    group (setup.py's GROUP, mypyc's `<group>__mypyc`) is not older than its source; `Python` where the source runs;
    `stale` where an older build runs. The library, not the module's own extension: that one only points into the
    library, and a build that finds it unchanged (`setup.py build_ext --inplace` again) leaves it as it was."""
    package, _, leaf = module.__name__.rpartition(".")
    if not isinstance(module.__loader__, ExtensionFileLoader) or not _built(package, leaf):
        return "Python"
    group_package, _, group = str(_setup_value("GROUP")).rpartition(".")
    library = _built(group_package, f"{group}__mypyc")
    if not library:
        raise LookupError(f"{module.__name__} is compiled, but no library {group}__mypyc is beside its package")
    return "compiled" if min(p.stat().st_mtime for p in library) >= source(module).stat().st_mtime else "stale"


def build_problem(module: ModuleType) -> str | None:
    """What the tests say where `module` is not the compiled build of its current source; None where it is."""
    state = build_state(module)
    if state == "Python":
        return f"{module.__name__} runs as Python: {REBUILD}"
    if state == "stale":
        return f"the compiled {module.__name__} is older than its source {source(module)}: {REBUILD}"
    return None


def load_as_python(module: ModuleType, name: str) -> ModuleType:
    """`module`'s source, loaded by path under `name` as plain Python (its imports are the modules as imported)."""
    spec = importlib.util.spec_from_file_location(name, source(module))
    if spec is None or spec.loader is None:
        raise LookupError(f"no loader for {source(module)}")
    out = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(out)
    return out


def outcome(run: Callable[[], Any]) -> Any:
    """What a call gives, or the exception it raises, so that either can be compared: its type and text, a
    HatpError's rule, reason, path, fix and data, and the type of the exception it was raised from."""
    try:
        return run()
    except Exception as exc:
        fields = exc.to_dict() if isinstance(exc, HatpError) else None
        return ("raised", type(exc).__name__, str(exc), fields, type(exc.__cause__).__name__)


class Int(int):
    pass


class Float(float):
    pass


class Str(str):
    pass


class Dict(dict[Any, Any]):
    pass


class List(list[Any]):
    pass


# Where compiled and interpreted code could part: bool is an int, subclasses pass isinstance but not `type() is`,
# ints past 64 bits and past 2**53, signed zero, NaN, infinities, lone surrogates, containers of the wrong kind
EDGES: list[Callable[[Any], Any]] = [
    lambda v: True,
    lambda v: False,
    lambda v: 2**63,
    lambda v: -(2**63) - 1,
    lambda v: 2**64 + 1,
    lambda v: 10**30,
    lambda v: 2**53,
    lambda v: 2**53 + 1,
    lambda v: -0.0,
    lambda v: math.nan,
    lambda v: math.inf,
    lambda v: 5e-324,
    lambda v: 2.0**53 + 2,
    lambda v: "\udc80",
    lambda v: "s\x00",
    lambda v: Int(v) if type(v) is int else v,
    lambda v: Float(v) if type(v) is float or (type(v) is int and abs(v) < 2**1000) else v,
    lambda v: Str(v) if type(v) is str else v,
    lambda v: Dict(v) if type(v) is dict else v,
    lambda v: List(v) if type(v) is list else v,
    lambda v: float(v) if type(v) is int and abs(v) < 2**1000 else v,
    lambda v: int(v) if type(v) is float and math.isfinite(v) else v,
    lambda v: v + 2**64 if type(v) is int else v,
    lambda v: -v if type(v) in (int, float) else v,
    lambda v: (v,),
    lambda v: {1: v},
]


def nodes(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a JSON document."""
    out: list[tuple[Any, Any]] = []
    todo = [doc]
    while todo:
        node = todo.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append((node, k))
            todo.append(v)
    return out


def edged(values: st.SearchStrategy[Any], edges: Sequence[Callable[[Any], Any]] = EDGES) -> st.SearchStrategy[Any]:
    """A value of `values` (a copy) with one to three of its members, or the value itself, swapped for an edge."""

    @st.composite
    def swapped(draw: st.DrawFn) -> Any:
        doc = copy.deepcopy(draw(values))
        for _ in range(draw(st.integers(1, 3))):
            edge = draw(st.sampled_from(edges))
            found = nodes(doc)
            if not found or draw(st.integers(0, 20)) == 0:
                return edge(doc)
            container, key = draw(st.sampled_from(found))
            container[key] = edge(container[key])
        return doc

    return swapped()

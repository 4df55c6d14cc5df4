"""The part of the build pyproject.toml cannot say: the saga reader and rules compiled with mypyc.

hatp_mcp/core/validate/saga_view.py and saga_rules.py are a clean saga plan's whole cost once the JSON is parsed,
and most of it is the interpreter stepping through their loops; compiled, the same source runs as C. They import no
pydantic (mypyc cannot compile a module that defines pydantic models), and they stay plain Python files: where this
machine has no C compiler, or mypyc is not installed, the build says so and installs them as Python, which then run
as they are (a compiled module next to its .py is the one imported). All or nothing: a build that fails part way
leaves none of the compiled modules behind, since they share one library. tests/core/validate/test_saga_compiled.py
fails where the compiled modules are not the ones imported, and holds them to their own source.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED = ["hatp_mcp/core/validate/saga_view.py", "hatp_mcp/core/validate/saga_rules.py"]
# One library for both (the rules call into the reader's class natively); named inside the package, so that an
# editable install (which maps packages, not the project root) finds it.
GROUP = "hatp_mcp.core.validate.saga_compiled"
# mypy's own configuration in pyproject.toml is for `make typecheck` (pydantic's plugin, the whole package), and the
# build's isolated environment has none of the runtime dependencies: the compiled modules use none of their types.
MYPY_ARGS = ["--config-file=", "--ignore-missing-imports", "--follow-imports=silent"]


def _warn(what: str) -> None:
    print(f"setup.py: {what}; the saga reader and rules install as Python (slower, same results)", file=sys.stderr)


def _compiled() -> list[Extension]:
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc (part of mypy) is not installed")
        return []
    return list(mypycify([*MYPY_ARGS, *COMPILED], group_name=GROUP, target_dir=os.path.join("build", "mypyc")))


class _AllOrNothing(build_ext):
    """build_ext that, when a compiled module fails to build (no C compiler, a compiler error), warns and leaves none
    of them: a module whose shared library is missing would fail to import instead of falling back to its .py."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # setuptools raises CompileError, LinkError, PlatformError, DistutilsExecError...
            for ext in self.extensions:  # built in the build's tree, or copied into the sources (editable)
                for path in (self.get_ext_fullpath(ext.name), self.get_ext_filename(ext.name)):
                    if os.path.exists(path):
                        os.remove(path)
            _warn(f"the C build failed ({type(exc).__name__}: {exc})")

    def get_outputs(self) -> list[str]:
        return [p for p in super().get_outputs() if os.path.exists(p)]


setup(ext_modules=_compiled(), cmdclass={"build_ext": _AllOrNothing})

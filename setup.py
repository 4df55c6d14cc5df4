"""The part of the build pyproject.toml cannot say: the modules compiled with mypyc.

- hatp_mcp/core/validate/saga_view.py and saga_rules.py, the saga reader and rules: a clean saga plan's whole cost
  once the JSON is parsed, most of it the interpreter stepping through their loops;
- hatp_mcp/core/signing/canonical.py, RFC 8785 canonical JSON: its type walk (`_fast_walk`) is a Python loop over
  every value, on the path of every digest and signature, beside orjson's C.

Compiled, the same source runs as C. They import no pydantic (mypyc cannot compile a module that defines pydantic
models), and they stay plain Python files: where this machine has no C compiler, or mypyc is not installed, the build
says so and installs them as Python, which then run as they are (a compiled module next to its .py is the one
imported). All or nothing: a build that fails part way leaves none of the compiled modules behind, since they share
one library. tests/core/validate/test_saga_compiled.py and tests/core/signing/test_canonical_compiled.py fail where
the compiled modules are not the ones imported, and hold them to their own source; tests/compiled.py reads COMPILED
from here (the Makefile's list, which rebuilds on an edit, is held to it).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "hatp_mcp/core/validate/saga_view.py",
    "hatp_mcp/core/validate/saga_rules.py",
    "hatp_mcp/core/signing/canonical.py",
]
# One library for all (the rules call into the reader's class and into canonical JSON natively), named inside the
# package both parts live in: an editable install maps packages, not the project root, so it finds the library there,
# and importing canonical JSON imports nothing of the validator's package (signing is the lowest part).
GROUP = "hatp_mcp.core.compiled"
# mypy's own configuration in pyproject.toml is for `make typecheck` (pydantic's plugin, the whole package), and the
# build's isolated environment has none of the runtime dependencies: there orjson (canonical.py's) is Any to mypyc,
# called as the Python object it is, as it is where its types are known.
MYPY_ARGS = ["--config-file=", "--ignore-missing-imports", "--follow-imports=silent"]


def _warn(what: str) -> None:
    print(f"setup.py: {what}; {', '.join(COMPILED)} install as Python (slower, same results)", file=sys.stderr)


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

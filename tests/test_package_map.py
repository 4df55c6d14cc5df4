"""Each package's docstring lists its modules: a reader opening a package's `__init__.py` finds the map of the part.

Every module of a package (a `*.py` file other than `__init__.py`) is named in the package's docstring as
`name.py`, and every subpackage (a folder with an `__init__.py`) as `name/`.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hatp_mcp"


def _packages(root: Path) -> list[Path]:
    return sorted(init.parent for init in root.rglob("__init__.py") if "__pycache__" not in init.parts)


def _modules(package: Path) -> list[str]:
    """The names a package's docstring must hold: `name.py` for each module, `name/` for each subpackage."""
    names = []
    for path in sorted(package.iterdir()):
        if path.suffix == ".py" and path.name != "__init__.py":
            names.append(path.name)
        elif path.is_dir() and (path / "__init__.py").is_file():
            names.append(f"{path.name}/")
    return names


def _named(name: str, docstring: str) -> bool:
    # A name inside a longer one (`store/txn_log.py` for `txn_log.py`, `x_txn_log.py`) does not count.
    return re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w])", docstring) is not None


def unnamed_modules(root: Path) -> dict[str, list[str]]:
    """Per package under `root` (its path relative to root's parent), the modules its docstring does not name."""
    missing: dict[str, list[str]] = {}
    for package in _packages(root):
        docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        absent = [name for name in _modules(package) if not _named(name, docstring)]
        if absent:
            missing[package.relative_to(root.parent).as_posix()] = absent
    return missing


def test_every_package_docstring_names_each_of_its_modules() -> None:
    missing = unnamed_modules(PACKAGE)
    report = "\n".join(f"{package}/__init__.py does not name: {', '.join(names)}" for package, names in missing.items())
    assert not missing, "add `- name.py: what it holds` to the package docstring:\n" + report


def test_a_module_the_docstring_does_not_name_fails_the_check(tmp_path: Path) -> None:
    copy = tmp_path / "runtime"
    shutil.copytree(PACKAGE / "runtime", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert unnamed_modules(copy) == {}
    (copy / "coordinator" / "planted.py").write_text('"""A module nobody listed."""\n')
    (copy / "coordinator" / "planted_part").mkdir()
    (copy / "coordinator" / "planted_part" / "__init__.py").write_text('"""A subpackage nobody listed."""\n')
    assert unnamed_modules(copy) == {"runtime/coordinator": ["planted.py", "planted_part/"]}


def test_a_module_named_only_inside_a_longer_name_or_path_is_not_named() -> None:
    assert not _named("record.py", "- txn_record.py: the record; core/txn/record.py holds its checks")
    assert _named("record.py", "- record.py: the hash-chained Transaction Record")
    assert _named("postgresql/", "PostgreSQL in `postgresql/` (imported only when opened)")

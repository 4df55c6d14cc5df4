"""Run every benchmark module in bench/ that exists (`make bench`)."""

from __future__ import annotations

import importlib
import pkgutil

import bench


def main() -> int:
    for info in sorted(pkgutil.iter_modules(bench.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.name == "run":
            continue
        print(f"== bench.{info.name}")
        module = importlib.import_module(f"bench.{info.name}")
        module.main()
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

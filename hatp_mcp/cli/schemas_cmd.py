"""`hatp schemas --write DIR` / `--check DIR`: the JSON Schemas in spec/schemas/, generated from the models."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, fail
from hatp_mcp.core.model.wire_models import WIRE_MODELS


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="DIR")
    group.add_argument("--check", metavar="DIR")


def generated() -> dict[str, str]:
    """file name -> schema text, for every wire model."""
    out: dict[str, str] = {}
    for name, model in WIRE_MODELS.items():
        schema: dict[str, Any] = model.model_json_schema(by_alias=True, mode="validation")
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"hatp:{name}", **schema}
        out[f"{name}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def run(args: argparse.Namespace) -> int:
    want = generated()
    if args.write:
        d = Path(args.write)
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.schema.json"):
            if old.name not in want:
                old.unlink()
        for name, text in want.items():
            (d / name).write_text(text)
        print(f"wrote {len(want)} schemas to {d}")
        return EXIT_OK
    d = Path(args.check)
    drift = [n for n, t in want.items() if not (d / n).exists() or (d / n).read_text() != t]
    extra = [p.name for p in d.glob("*.schema.json") if p.name not in want]
    if drift or extra:
        return fail(f"schemas in {d} drift from the models: {sorted(drift + extra)}; run `make schemas`", EXIT_PROBLEMS)
    print(f"{len(want)} schemas match the models")
    return EXIT_OK

"""Shared CLI plumbing: reading input files into wire objects, and printing errors as one line on stderr."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TypeVar

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.wire import load_json, parse
from hatp_mcp.errors import HatpError

__all__ = ["EXIT_BAD_INPUT", "EXIT_OK", "EXIT_PROBLEMS", "InputError", "fail", "print_json", "read_json", "read_model"]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2
M = TypeVar("M", bound=WireModel)


class InputError(Exception):
    """A file that cannot be read or parsed; the message is one line naming the file and the path."""


def read_json(path: str) -> Any:
    """Raises InputError."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return load_json(data, path)
    except HatpError as exc:
        raise InputError(f"{exc.rule}: {exc.reason}") from exc


def read_model(path: str, model: type[M]) -> M:
    """Raises InputError."""
    value = read_json(path)
    try:
        return parse(model, value, path)
    except HatpError as exc:
        raise InputError(f"{exc.rule}: {exc.reason}") from exc


def fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"hatp: {message}".replace("\n", " "), file=sys.stderr)
    return code


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))

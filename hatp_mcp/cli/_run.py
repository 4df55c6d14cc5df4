"""Shared CLI plumbing: reading input files into wire objects, and printing errors as one line on stderr.

Every file a subcommand reads goes through `read_json` (the one loader, HATP-OBJ-1/2/4) and, where the subcommand
reads members, `read_object`; what cannot be read or used is an InputError naming the file and its rule, which the
subcommand prints as one line and exits 2 (spec/mcp-binding.md HATP-MCP-52). `main` (cli/__init__.py) is the
backstop: a HatpError or InputError no subcommand caught is printed the same way."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TypeVar

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.wire import load_json, parse
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "InputError",
    "fail",
    "print_json",
    "read_json",
    "read_model",
    "read_object",
    "read_signing_key",
]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_BAD_INPUT = 2
M = TypeVar("M", bound=WireModel)


class InputError(Exception):
    """A file that cannot be read, parsed or used; the message is one line naming the file and the path, `rule`
    the rule that refused it (HATP-MCP-52 when no wire rule did)."""

    def __init__(self, message: str, rule: str = "HATP-MCP-52") -> None:
        super().__init__(message)
        self.rule = rule

    def to_dict(self) -> dict[str, str]:
        """The refusal as a `--json` caller reads it."""
        return {"rule": self.rule, "reason": str(self)}


def read_json(path: str) -> Any:
    """Raises InputError."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"HATP-MCP-52: {path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return load_json(data, path)
    except HatpError as exc:
        raise InputError(f"{exc.rule}: {exc.reason}", exc.rule) from exc


def read_object(path: str, what: str = "a JSON object") -> dict[str, Any]:
    """The JSON object in `path` (`what` says what the subcommand expects there). Raises InputError: the file
    cannot be read (read_json) or holds another JSON value (HATP-MCP-52)."""
    value = read_json(path)
    if not isinstance(value, dict):
        raise InputError(f"HATP-MCP-52: {path} at $: expected {what}, found a JSON {_json_name(value)}")
    return value


def read_signing_key(path: str) -> SigningKey:
    """The private Ed25519 JWK in `path`. Raises InputError naming the file (HATP-MCP-52 or the loader's rule)."""
    try:
        return SigningKey.from_jwk(read_object(path, "a private JWK"))
    except ValueError as exc:
        raise InputError(f"HATP-MCP-52: {path}: {exc}") from exc


def _json_name(value: object) -> str:
    names = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), "value")


def read_model(path: str, model: type[M]) -> M:
    """Raises InputError."""
    value = read_json(path)
    try:
        return parse(model, value, path)
    except HatpError as exc:
        raise InputError(f"{exc.rule}: {exc.reason}", exc.rule) from exc


def fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
    print(f"hatp: {message}".replace("\n", " "), file=sys.stderr)
    return code


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))

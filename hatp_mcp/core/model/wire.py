"""Turning untrusted bytes into wire objects, with one-line errors that name the source and the JSON path.

`load_json` bounds size and depth, refuses invalid UTF-8, duplicate keys, NaN/Infinity and numbers that overflow a
double (HATP-OBJ-4: `1e400` would otherwise become infinity, then null); `parse` validates
a parsed value against a model and reports pydantic's errors as a WireError with a JSON path like
``branches[2].amount``. Pure: takes bytes, never opens files.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hatp_mcp.core.model.base import NON_FINITE, WireModel
from hatp_mcp.errors import HatpError

__all__ = ["MAX_BYTES", "MAX_DEPTH", "WireError", "deeper_than", "error_path", "explain", "load_json", "parse"]

MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
M = TypeVar("M", bound=WireModel)


class WireError(HatpError):
    """Input that is not a valid wire object: HATP-OBJ-1 (not JSON), HATP-OBJ-2 (limits), HATP-OBJ-3 (schema)."""


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def error_path(loc: tuple[int | str, ...]) -> str:
    """A JSON path like ``branches[2].amount``; a member name that is not a plain identifier is written quoted,
    ``["odd key"]``, with JSON escapes, so a path never spans lines or hides characters."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(str(part)):
            out += ("." if out else "") + str(part)
        else:
            out += f"[{json.dumps(str(part))}]"
    return out or "$"


def explain(err: Any, model: type[BaseModel]) -> str:
    """One pydantic error as a sentence that says what is wrong at its JSON path and what to do instead."""
    path = error_path(tuple(err["loc"]))
    if err["type"] == "extra_forbidden":
        msg = f"{path} is not a member this format defines (unknown fields are refused, never ignored)"
        fix = "remove it, or check its spelling"
    elif err["type"] == "missing":
        msg = f"{path} is required and missing"
        fix = f"add {path}"
    else:
        msg = f"{path}: {err['msg']}"
        fix = f"make {path} match the {model.__name__} schema"
    return f"{msg}. {fix[0].upper()}{fix[1:]}."


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # built in C; a key given twice leaves fewer entries than pairs
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _v in pairs:
            if k in seen:
                raise ValueError(f"duplicate key {k!r}")
            seen.add(k)
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Overflow(ValueError):
    """A number that a double cannot hold (HATP-OBJ-4)."""


_DOUBLE_DIGITS = len(str(int(sys.float_info.max)))  # 309: an integer with more digits overflows a double


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Overflow(f"the number {text[:40]} overflows a double")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _DOUBLE_DIGITS or abs(value := int(text)) > sys.float_info.max:
        raise _Overflow(f"the integer of {len(text.lstrip('-'))} digits overflows a double")
    return value


def deeper_than(value: dict[str, Any] | list[Any], levels: int) -> bool:
    """True when the container `value` (one level itself) nests more than `levels` levels deep. Visits containers
    only and stops at the first path past the bound, so it recurses at most `levels` + 1 calls deep."""
    if levels < 1:
        return True
    for child in value.values() if isinstance(value, dict) else value:
        if isinstance(child, dict | list) and deeper_than(child, levels - 1):
            return True
    return False


def load_json(data: bytes, source: str = "input", *, envelope: int = 0) -> Any:
    """Parse JSON bytes. Raises WireError naming `source` and what is wrong. `envelope`: levels around the
    document that do not count against MAX_DEPTH (a JSON-RPC message's own object around its params)."""
    if len(data) > MAX_BYTES:
        raise WireError("HATP-OBJ-2", f"{source}: {len(data)} bytes is more than the {MAX_BYTES}-byte limit", path="$")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError("HATP-OBJ-1", f"{source}: not UTF-8 (byte {exc.start})", path="$") from exc
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_bounded_int,
        )
    except _Overflow as exc:
        raise WireError(
            "HATP-OBJ-4", f"{source}: {exc}", path="$", fix="send a number a double holds, or a decimal string"
        ) from exc
    except RecursionError as exc:
        raise WireError("HATP-OBJ-2", f"{source}: nested deeper than {MAX_DEPTH} levels", path="$") from exc
    except json.JSONDecodeError as exc:
        raise WireError(
            "HATP-OBJ-1", f"{source}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", path="$"
        ) from exc
    except ValueError as exc:
        raise WireError("HATP-OBJ-1", f"{source}: not JSON: {exc}", path="$") from exc
    if isinstance(value, dict | list) and deeper_than(value, MAX_DEPTH + envelope):
        raise WireError("HATP-OBJ-2", f"{source}: nested deeper than {MAX_DEPTH} levels", path="$")
    return value


def parse(model: type[M], value: Any, source: str = "input") -> M:
    """Validate `value` as `model`. Raises WireError (HATP-OBJ-3) naming the first bad path and the count."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = next((e for e in errors if e["type"] == NON_FINITE), errors[0])
        path = error_path(tuple(first["loc"]))
        msg = first["msg"]
        if first["type"] == NON_FINITE:  # HATP-OBJ-4: its own rule, and the path down to the number itself
            ctx = first.get("ctx") or {}
            inner = str(ctx.get("where", ""))
            msg = f"{ctx.get('shown')} is not a finite number a double holds (NaN, infinities, overflow)"
            if inner and inner != "the value":
                path = (path if path != "$" else "") + ("" if inner.startswith("[") or path == "$" else ".") + inner
            raise WireError(
                "HATP-OBJ-4",
                f"{source}: {path}: {msg}",
                path=path,
                fix="send finite numbers a double holds (amounts as decimal strings); never NaN or Infinity",
            ) from exc
        if first["type"] == "extra_forbidden":
            msg = "unknown field; the protocol refuses members it does not define"
        elif first["type"] == "missing":
            msg = "required field is missing"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise WireError(
            "HATP-OBJ-3",
            f"{source}: {path}: {msg}{more}",
            path=path,
            fix=f"make {path} match the {model.__name__} schema",
            data={"errors": [{"path": error_path(tuple(e["loc"])), "message": explain(e, model)} for e in errors[:64]]},
        ) from exc

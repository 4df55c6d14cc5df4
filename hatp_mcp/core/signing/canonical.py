"""RFC 8785 (JSON Canonicalization Scheme) canonical JSON, and the sha256 digests built on it.

Two paths produce the same bytes:
- the fast path: a type walk that proves the value is inside the safe domain (integers within +-(2**53 - 1),
  finite floats only where the caller allows floats, string keys, only the Basic Multilingual Plane), then orjson
  with sorted keys. Inside that domain orjson's output is RFC 8785 byte for byte: UTF-8 code-point order equals
  UTF-16 code-unit order for BMP keys, and orjson escapes strings exactly as RFC 8785 does. orjson's own float
  form is not ECMAScript's (`100.0`, `1e21`), so where floats are allowed, the containers that hold one are
  copied with each float replaced by an `orjson.Fragment` of its ECMAScript form (`es6_number`), in one pass.
  Proven in tests on the RFC's vectors and by property tests against the `rfc8785` package and the exact path.
- the exact path, pure Python: the oracle, and what runs when a string leaves the BMP or a value is outside the
  domain (it raises naming the JSON path of the first bad node): keys sorted by UTF-16 code units, numbers in
  ECMAScript form.

This module does no IO. It is compiled with mypyc where a C compiler is there (setup.py: the type walk is a Python
loop over every value, on the path of every digest and signature), and runs as this same file elsewhere. Annotations
are enforced when compiled: a value not checked yet stays `Any`.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import orjson

from hatp_mcp.errors import HatpError

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "CanonicalError",
    "canonical",
    "canonical_exact",
    "canonical_typed",
    "digest",
    "digest_bytes",
    "es6_number",
    "surely_canonical",
    "within_safe_domain",
]

MAX_SAFE_INTEGER = 2**53 - 1
# HATP-CANON-2: arrays and objects nest at most this deep (orjson's own limit, so the fast path and the exact one
# agree); deeper is refused by name, never a RecursionError
MAX_DEPTH = 254
_OPT = orjson.OPT_SORT_KEYS | orjson.OPT_STRICT_INTEGER
_NON_BMP = re.compile(rb"[\xf0-\xf4]")
# written with chr(): mypyc refuses a surrogate code point in a string literal (the module is compiled, setup.py)
_SURROGATE = re.compile(f"[{chr(0xD800)}-{chr(0xDFFF)}]")


# Compiled (setup.py), it stays a regular Python class, as it is here: `metaclass=type` (every class's, no change as
# Python) tells mypyc so, else a native class would pickle without its rule and path. `self` is typed as the base
# since mypyc checks a typed `self` by exact class, which would refuse a subclass's instance.
class CanonicalError(HatpError, metaclass=type):  # noqa: UP050 (redundant to Python, not to mypyc)
    """A value outside the canonical domain (rule HATP-CANON-2)."""

    def __init__(self: HatpError, reason: str, path: str = "", fix: str = "") -> None:
        HatpError.__init__(self, "HATP-CANON-2", reason, path=path, fix=fix)


def canonical(obj: Any, *, allow_floats: bool = False) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON value.

    Raises CanonicalError for floats (unless `allow_floats`), NaN or infinities, integers beyond 2**53 - 1,
    non-string keys, lone surrogates and values that are not JSON (tuples, sets, bytes, Decimal, objects).
    """
    t = type(obj)
    fast: Any = _OUTSIDE
    if t is dict or t is list:
        if not allow_floats:
            if _fast_walk(obj):
                fast = obj
        else:
            try:
                fast = _with_fragments(obj)
            except _Outside:
                pass
    elif t is str or t is bool or obj is None:
        fast = obj
    elif t is float and allow_floats and obj - obj == 0.0:
        return _es6_fast(obj).encode()
    if fast is not _OUTSIDE:
        try:
            out = orjson.dumps(fast, option=_OPT)
        except orjson.JSONEncodeError:
            out = b""  # e.g. a lone surrogate: the exact path below names where
        if out and (out.isascii() or _NON_BMP.search(out) is None):
            return out
    return canonical_exact(obj, allow_floats=allow_floats)


def canonical_typed(obj: dict[str, Any], free: list[Any]) -> bytes:
    """`canonical(obj)` for a typed model's JSON dump (`model_dump(mode="json")`), walking only its free-form
    parts: the same bytes and the same CanonicalError as `canonical(obj)`, for less work.

    The caller promises that outside the subtrees listed in `free` every value is a str, an int, a bool or None,
    or a dict/list of those (what a pydantic JSON dump of fields typed as such holds), and `free` lists every
    subtree that may hold anything else (a float, in free-form JSON). Then the whole-value walk of `canonical`
    can only fail inside `free`: floats and non-JSON values live only there, an unsafe integer anywhere makes
    orjson's OPT_STRICT_INTEGER raise, a lone surrogate or a non-string key makes it raise. Anything this path
    does not handle (a failed walk, an orjson error, a character beyond the BMP) goes to `canonical(obj)`, which
    decides and raises naming the path.
    """
    for part in free:
        if not _fast_walk(part):
            return canonical(obj)
    try:
        out = orjson.dumps(obj, option=_OPT)
    except orjson.JSONEncodeError:
        return canonical(obj)
    if out.isascii() or _NON_BMP.search(out) is None:
        return out
    return canonical(obj)


def surely_canonical(obj: Any) -> bool:
    """True when `canonical(obj)` surely succeeds: only exact JSON types (no subclasses, no floats), integers
    within +-(2**53 - 1), string keys, no lone surrogate (orjson refuses those three). False means it may fail:
    `canonical` then decides, and names the path when it does. Computes no canonical form to keep."""
    if not _fast_walk(obj):
        return False
    try:
        orjson.dumps(obj, option=_OPT)
    except orjson.JSONEncodeError:
        return False
    return True


def within_safe_domain(obj: Any) -> bool:
    """True when every value is a str, int, bool, None, dict or list and every integer is within +-(2**53 - 1):
    the fast path's domain, so no float at all. False decides nothing (a float may be fine where it is allowed)."""
    return _fast_walk(obj)


def canonical_exact(obj: Any, *, allow_floats: bool = False) -> bytes:
    """The pure-Python path alone: the oracle the fast path is proven equal to. Same contract as `canonical`."""
    parts: list[str] = []
    _exact(obj, parts, "$", allow_floats, 0)
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalError("a string holds a lone surrogate, which is not Unicode text", "$") from exc


_OUTSIDE = object()


class _Outside(Exception):
    """A value outside the fast path's domain: the exact path names where."""


def _fast_walk(obj: Any) -> bool:
    """True when every value is a str/int/bool/None/dict/list and every integer is safe.

    False sends the value to the exact path, which raises with the JSON path of the first bad node. Members are
    looked at in their container's loop (only containers go on the stack): most are strings.
    """
    if type(obj) is not dict and type(obj) is not list:
        obj = [obj]
    stack: list[Any] = [obj]
    pop = stack.pop
    push = stack.append
    while stack:
        x = pop()
        # keys are not checked here: orjson refuses non-string keys, and the exact path then names where
        for v in x.values() if type(x) is dict else x:
            t = type(v)
            if t is str or t is bool or v is None:
                continue
            if t is dict or t is list:
                push(v)
            elif t is int:
                if not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                    return False
            else:
                return False
    return True


def _with_fragments(x: Any, depth: int = 0) -> Any:
    """The value with every finite float replaced by an orjson.Fragment of its ECMAScript form, in one pass:
    containers without floats are returned as they are (no copy); a container holding one is copied. Raises
    _Outside for an unsafe integer, a non-finite float or a value that is not JSON."""
    t = type(x)
    if (t is dict or t is list) and depth >= MAX_DEPTH:
        raise _Outside  # the exact path names where
    if t is dict:
        new: Any = None
        for k, v in x.items():
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            w = _with_fragments(v, depth + 1)
            if w is not v:
                if new is None:
                    new = dict(x)
                new[k] = w
        return x if new is None else new
    if t is list:
        new = None
        for i, v in enumerate(x):
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            w = _with_fragments(v, depth + 1)
            if w is not v:
                if new is None:
                    new = list(x)
                new[i] = w
        return x if new is None else new
    if t is int:
        if -MAX_SAFE_INTEGER <= x <= MAX_SAFE_INTEGER:
            return x
        raise _Outside
    if t is float and x - x == 0.0:  # x - x is NaN for NaN and both infinities
        return orjson.Fragment(_es6_fast(x).encode())
    if t is str or t is bool or x is None:
        return x
    raise _Outside


def _es6_fast(x: float) -> str:
    """es6_number for a finite float. Inside 1e-4 <= |x| < 1e16 Python's repr is fixed notation with the same
    shortest round-trip digits ECMAScript prints, less the `.0` of a whole number; elsewhere (an exponent in the
    repr) the general conversion runs."""
    r = repr(x)
    if "e" in r:
        return es6_number(x)
    if r.endswith(".0"):
        return "0" if r in ("0.0", "-0.0") else r[:-2]
    return r


_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_NEEDS_ESC = re.compile(r'["\\\x00-\x1f]')


def _quote(s: str) -> str:
    return '"' + _NEEDS_ESC.sub(lambda m: _ESC.get(m.group(), f"\\u{ord(m.group()):04x}"), s) + '"'


def _utf16_key(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def _exact(obj: Any, out: list[str], path: str, allow_floats: bool, depth: int) -> None:
    t = type(obj)
    if (t is dict or t is list) and depth >= MAX_DEPTH:
        raise CanonicalError(
            f"arrays and objects are nested deeper than {MAX_DEPTH} levels here", path, "send a flatter value"
        )
    if obj is None:
        out.append("null")
    elif t is bool:
        out.append("true" if obj else "false")
    elif t is str:
        if _SURROGATE.search(obj):
            raise CanonicalError("the string holds a lone surrogate, which is not Unicode text", path)
        out.append(_quote(obj))
    elif t is int:
        if not -MAX_SAFE_INTEGER <= obj <= MAX_SAFE_INTEGER:
            raise CanonicalError(
                f"integer {obj} is outside +-(2**53 - 1), where JSON numbers stop being exact",
                path,
                "send it as a decimal string",
            )
        out.append(str(obj))
    elif t is float:
        if not allow_floats:
            raise CanonicalError(
                f"float {obj!r} is not allowed: floats make amounts and digests ambiguous",
                path,
                'send amounts as decimal strings ("12.50") and counts as integers',
            )
        out.append(es6_number(obj, path))
    elif t is list:
        out.append("[")
        for i, v in enumerate(obj):
            if i:
                out.append(",")
            _exact(v, out, f"{path}[{i}]", allow_floats, depth + 1)
        out.append("]")
    elif t is dict:
        for k in obj:
            if type(k) is not str:
                raise CanonicalError(f"object key {k!r} is not a string", path, "use string keys only")
            if _SURROGATE.search(k):
                raise CanonicalError("a member name holds a lone surrogate, which is not Unicode text", path)
        out.append("{")
        for i, k in enumerate(sorted(obj, key=_utf16_key)):
            if i:
                out.append(",")
            out.append(_quote(k))
            out.append(":")
            _exact(obj[k], out, f"{path}.{k}", allow_floats, depth + 1)
        out.append("}")
    else:
        raise CanonicalError(f"a {t.__name__} is not a JSON value", path, "convert it to a JSON type first")


def es6_number(x: Any, path: str = "$") -> str:
    """Serialize a finite float as ECMAScript's Number.prototype.toString does (RFC 8785 section 3.2.2.3)."""
    # `x` is Any, not float: compiled (setup.py), a float parameter turns an int into a float (2**53 + 1 would print
    # as 2**53), where Python prints the int's own digits; the callers here pass floats only
    if math.isnan(x) or math.isinf(x):
        raise CanonicalError(f"{x!r} has no JSON form", path, "send a finite number")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    r = repr(abs(x))  # shortest round-trip digits, as ECMAScript requires
    mant, _, exp_s = r.partition("e")
    exp = int(exp_s) if exp_s else 0
    int_part, _, frac_part = mant.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # position of the decimal point relative to the start of `digits`
    lead_zeros = len(int_part + frac_part) - len((int_part + frac_part).lstrip("0"))
    n = len(int_part) + exp - lead_zeros
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        es = f"e+{e}" if e >= 0 else f"e-{-e}"
        s = digits + es if k == 1 else digits[0] + "." + digits[1:] + es
    return sign + s


def digest_bytes(data: bytes) -> str:
    """`sha256:<hex>` of raw bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(obj: Any) -> str:
    """`sha256:<hex>` of the canonical form of a JSON value (raises CanonicalError outside the domain)."""
    return digest_bytes(canonical(obj))

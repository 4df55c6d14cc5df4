"""How the proxy reaches its upstream: the policy file read from disk, and the stdio server's parameters with
exactly the environment the file names, its secrets read from the proxy's environment or from owner-only files
(HATP-PXY-2, spec/proxy.md).

The MCP SDK's stdio client starts a server with its minimal default environment (PATH, HOME, USER, ...) merged
under the `env` given here, never the caller's whole environment; the proxy adds only what the file names. No
value read here is ever put in an error or a log line: refusals name the variable, the path and the file.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from hatp_mcp.core.model.proxy_policy import (
    EnvFromEnv,
    EnvFromFile,
    EnvValue,
    HttpUpstream,
    ProxyPolicy,
    StdioUpstream,
    load_policy,
)
from hatp_mcp.errors import HatpError
from hatp_mcp.store.private_files import read_private

__all__ = [
    "START_TIMEOUT",
    "HttpTarget",
    "Target",
    "first_error",
    "list_upstream",
    "read_policy",
    "stdio_parameters",
    "upstream_client",
    "upstream_target",
    "upstream_unavailable",
]

RULE = "HATP-PXY-2"
# The bound, in seconds, on the upstream's start: its `initialize` handshake and its tools/list (HATP-PXY-4).
START_TIMEOUT = 30.0


@dataclass(frozen=True)
class HttpTarget:
    """An HTTP upstream with the headers it is sent on every request; their values are secrets (HATP-PXY-46), so
    they are left out of the repr."""

    url: str
    headers: Mapping[str, str] = field(repr=False)


Target = str | HttpTarget | StdioServerParameters


def upstream_client(target: Target, errlog: TextIO | None = None) -> Client:
    """A client of the upstream, not yet entered; a stdio server's stderr goes to `errlog`."""
    if isinstance(target, str):
        return Client(target)
    if isinstance(target, HttpTarget):  # HATP-PXY-46: the file's headers on every request
        return Client(_with_headers(target))
    return Client(stdio_client(target, errlog=errlog) if errlog is not None else stdio_client(target))


@asynccontextmanager
async def _with_headers(target: HttpTarget) -> AsyncIterator[Any]:
    """The streamable HTTP transport over an HTTP client that sends the target's headers on every request."""
    async with (
        create_mcp_http_client(headers=dict(target.headers)) as http,
        streamable_http_client(target.url, http_client=http) as streams,
    ):
        yield streams


def first_error(exc: BaseException) -> str:
    """The innermost first error of a (group of) exceptions, as `Type: message`."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def upstream_unavailable(cause: str, where: str = "DATA/upstream.stderr") -> HatpError:
    """HATP-PXY-4's refusal of an upstream that did not start or list its tools; `cause` never holds the
    upstream's environment (HATP-PXY-2)."""
    return HatpError(
        "HATP-PXY-4",
        f"the upstream did not start or list its tools ({cause})",
        path="upstream",
        code="UPSTREAM_UNAVAILABLE",
        fix=f"check upstream.command, args and cwd (or url); its stderr is in {where}",
    )


async def list_upstream(target: Target, bound: float = START_TIMEOUT, errlog: TextIO | None = None) -> list[types.Tool]:
    """Start the upstream, list its tools and stop it, all within `bound` seconds. Raises HatpError HATP-PXY-4
    (`UPSTREAM_UNAVAILABLE`)."""
    try:
        with anyio.fail_after(bound):
            async with upstream_client(target, errlog) as upstream:
                return (await upstream.list_tools()).tools
    except TimeoutError:
        raise upstream_unavailable(f"no answer within {bound:g}s", "its stderr") from None
    except Exception as exc:
        raise upstream_unavailable(first_error(exc), "its stderr") from None


def read_policy(path: Path) -> ProxyPolicy:
    """The policy file at `path`. Raises HatpError HATP-PXY-1 (not JSON, not of the schema), HATP-PXY-3."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise HatpError(
            "HATP-PXY-1",
            f"cannot read the policy file {path}: {type(exc).__name__}: {exc}",
            code="BAD_POLICY",
            fix="give --policy a readable JSON policy file",
        ) from None
    return load_policy(doc, f"policy file {path.name}")


def upstream_target(policy: ProxyPolicy, base: Path, environ: Mapping[str, str] | None = None) -> Target:
    """The URL (with its headers, resolved), or how to start the stdio server: its `cwd` and relative paths taken
    from `base` (the policy file's folder), its `env` exactly the file's, resolved. Raises HatpError HATP-PXY-2
    (`ENV_NOT_SET`, `SECRET_FILE_OPEN`, `SECRET_FILE_UNREADABLE`) for a variable or a header (HATP-PXY-46)."""
    up = policy.upstream
    source = os.environ if environ is None else environ
    if isinstance(up, HttpUpstream):
        if not up.headers:  # HATP-PXY-46: headers only when the file names some
            return up.url
        return HttpTarget(up.url, _resolved(up.headers, "upstream.headers", "header", base, source))
    return stdio_parameters(up, base, source)


def stdio_parameters(
    up: StdioUpstream, base: Path, environ: Mapping[str, str] | None = None, where: str = "upstream"
) -> StdioServerParameters:
    """How to start a stdio server the operator's file names (the proxy's upstream, an entry of the journal's
    allow-list, HATP-PXY-50): its `cwd` and relative secret files taken from `base` (the file's folder), its `env`
    exactly the file's, resolved; `where` is the entry's JSON path in its file. Raises HatpError HATP-PXY-2
    (`ENV_NOT_SET`, `SECRET_FILE_OPEN`, `SECRET_FILE_UNREADABLE`)."""
    source = os.environ if environ is None else environ
    env = _resolved(up.env, f"{where}.env", "variable", base, source)
    cwd = base / up.cwd if up.cwd is not None else base
    return StdioServerParameters(command=up.command, args=list(up.args), env=env, cwd=str(cwd))


def _resolved(
    values: Mapping[str, EnvValue], at: str, what: str, base: Path, source: Mapping[str, str]
) -> dict[str, str]:
    """Each value literal, from the proxy's environment or from an owner-only file. Raises HatpError HATP-PXY-2
    naming the variable or header, the path and the file, never a value."""
    out: dict[str, str] = {}
    for name, value in values.items():
        where = f"{at}.{name}"
        if isinstance(value, EnvFromEnv):
            got = source.get(value.env)
            if got is None:
                raise HatpError(
                    RULE,
                    f"the upstream's {what} {name} is to come from the proxy's variable {value.env}, which is not set",
                    path=where,
                    code="ENV_NOT_SET",
                    fix=f"set {value.env} in the proxy's environment, or give {name} another value",
                )
            out[name] = got
        elif isinstance(value, EnvFromFile):
            out[name] = _secret(base / value.file, where)
        else:
            out[name] = value
    return out


def _secret(path: Path, at: str) -> str:
    """The content of an owner-only file, without its trailing newline. Checked on the file opened, so the file
    read is the file checked."""
    try:
        mode, raw = read_private(path)
    except OSError as exc:
        raise HatpError(
            RULE,
            f"cannot open the secret file {path} ({exc.strerror})",
            path=f"{at}.file",
            code="SECRET_FILE_UNREADABLE",
            fix="name a file the proxy can read",
        ) from None
    if raw is None:
        raise HatpError(
            RULE,
            f"the secret file {path} has mode {stat.S_IMODE(mode):04o}: others than its owner may use it",
            path=f"{at}.file",
            code="SECRET_FILE_OPEN",
            fix=f"chmod 600 {path} (a regular file only its owner may read or write)",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise HatpError(
            RULE,
            f"the secret file {path} is not UTF-8 text",
            path=f"{at}.file",
            code="SECRET_FILE_UNREADABLE",
            fix="store the value as UTF-8 text",
        ) from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text

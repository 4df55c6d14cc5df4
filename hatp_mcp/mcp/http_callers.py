"""Who sent a request over streamable HTTP: a bearer token per caller, configured by the operator. One mechanism
for every server that serves callers over HTTP: the journal and the journaling proxy (HATP-JRN-17) and the
coordinator (HATP-MCP-53).

The operator's callers file names each caller and the SHA-256 of its token (never the token itself):
`{"callers": {"agent://acme.com/travel-bot": {"tokenSha256": "<64 hex>"}}}`; the caller sends
`Authorization: Bearer <token>` on every HTTP request (`new_token()` makes one, `hash_token` its file entry,
`write_callers` a whole file). A caller's id is the address it acts as: the journal binds each saga to the caller
that began it, the coordinator each transaction to its plan's `requester.agent`. An entry may carry
`"sees": "all"`: the operator grants that caller every transaction of the coordinator, not only its own.
`caller_middleware` is an SDK middleware on a server: a request it guards that arrived over HTTP without a token
of the file is refused with a JSON-RPC error (`CALLER_UNPROVEN`, under the server's rule) before any handler
runs, so nothing is read or done; an accepted one runs with its caller known (`current_caller()`). Over stdio
there is no HTTP request: the parent process that started the server is its only caller, and nothing changes.
Tokens are compared by their digests in constant time and never logged.
"""

from __future__ import annotations

import argparse
import contextvars
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import to_mcp_error

__all__ = [
    "RULE",
    "Caller",
    "CallerTokens",
    "add_callers_argument",
    "bearer_client",
    "caller_middleware",
    "current_caller",
    "hash_token",
    "journal_guards",
    "local_caller",
    "new_token",
    "not_owner",
    "read_callers",
    "write_callers",
]

RULE = "HATP-JRN-17"  # the journal's; the coordinator passes its own (HATP-MCP-53)
_HEX = re.compile(r"^[0-9a-f]{64}$")
SEES = ("own", "all")


@dataclass(frozen=True)
class Caller:
    """A proven caller: its id (the address it acts as) and whether the operator let it see everything."""

    id: str
    sees_all: bool = False


_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar("hatp_http_caller", default=None)


def new_token() -> str:
    """A fresh bearer token (256 random bits) to hand to one caller."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What the callers file holds for `token`: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class CallerTokens:
    """Each caller's token digest, and the callers granted every transaction. Build with `parse`."""

    digests: Mapping[str, str]
    sees_all: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, doc: Any, where: str = "callers file") -> CallerTokens:
        """Raises ValueError naming what is wrong (no callers, a digest that is not 64 hex, one digest twice, a
        `sees` that is neither "own" nor "all")."""
        callers = doc.get("callers") if isinstance(doc, Mapping) else None
        if not isinstance(callers, Mapping) or not callers:
            raise ValueError(f'{where}: {{"callers": {{"<caller id>": {{"tokenSha256": "<64 hex>"}}}}}}')
        digests: dict[str, str] = {}
        sees_all: set[str] = set()
        for name, entry in callers.items():
            digest = entry.get("tokenSha256") if isinstance(entry, Mapping) else None
            if not isinstance(name, str) or not name or not isinstance(digest, str) or not _HEX.fullmatch(digest):
                raise ValueError(f"{where}: callers.{name}.tokenSha256: the SHA-256 of its token, 64 lowercase hex")
            if digest in digests.values():
                raise ValueError(f"{where}: callers.{name}: another caller has the same token")
            sees = entry.get("sees", "own")
            if sees not in SEES:
                raise ValueError(f'{where}: callers.{name}.sees: "own" (the default) or "all", not {sees!r}')
            digests[name] = digest
            if sees == "all":
                sees_all.add(name)
        return cls(digests, frozenset(sees_all))

    def caller_of(self, authorization: str | None) -> str | None:
        """The caller whose token an `Authorization` header carries, or None."""
        if authorization is None or not authorization.startswith("Bearer "):
            return None
        got = hash_token(authorization.removeprefix("Bearer ").strip())
        found = None
        for name, digest in self.digests.items():  # every entry compared: the time says nothing of which matched
            if hmac.compare_digest(got, digest):
                found = name
        return found


def write_callers(path: Path, tokens: Mapping[str, str], *, sees_all: Collection[str] = ()) -> Path:
    """Write a callers file at `path` (owner-only) for `tokens` (caller id -> token): each token's digest, never
    the token; the callers in `sees_all` see every transaction. Returns `path`."""
    doc = {
        name: {"tokenSha256": hash_token(token)} | ({"sees": "all"} if name in sees_all else {})
        for name, token in tokens.items()
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"callers": doc}, out, indent=2)
    return path


def local_caller(path: Path, caller: str, *, sees_all: bool = False) -> str:
    """A fresh token for `caller`, its digest written as the whole callers file at `path` (a parent that starts a
    server over HTTP and calls it itself: the tests, the demos, the bench). Returns the token."""
    token = new_token()
    write_callers(path, {caller: token}, sees_all=[caller] if sees_all else [])
    return token


@asynccontextmanager
async def bearer_client(url: str, token: str) -> AsyncIterator[Client]:
    """An MCP client of the server at `url` (streamable HTTP) that sends `token` on every request."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def current_caller() -> Caller | None:
    """The authenticated caller of the request being handled; None over stdio (the parent process)."""
    return _caller.get()


def not_owner(saga_id: str, owner: str | None, caller: str) -> HatpError:
    whose = f"the caller {owner!r}" if owner is not None else "a caller over stdio (it names no owner)"
    return HatpError(
        RULE,
        f"saga {saga_id} was begun by {whose}, not by {caller!r}: nothing is done with it",
        path="saga_id",
        code="NOT_SAGA_OWNER",
        fix="act on the sagas you began, with your own token",
    )


def journal_guards(method: str) -> bool:
    """The journal's guarded requests: its tool calls (HATP-JRN-17)."""
    return method == "tools/call"


def caller_middleware(
    tokens: CallerTokens,
    *,
    rule: str = RULE,
    server: str = "journal",
    guards: Callable[[str], bool] = journal_guards,
) -> ServerMiddleware[Any]:
    """Refuse every request over HTTP whose method `guards` names and that carries no known caller's token (under
    `rule`); run the others as that caller."""

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        request = ctx.request
        if request is None or not guards(ctx.method):  # stdio (the parent), or nothing guarded runs
            return await call_next(ctx)
        headers = getattr(request, "headers", None)
        caller = tokens.caller_of(headers.get("authorization") if headers is not None else None)
        if caller is None:
            raise to_mcp_error(
                HatpError(
                    rule,
                    f"a {server} request over HTTP needs the bearer token of a caller the operator configured; none"
                    " was given, or it is not one of them: nothing was read or done",
                    path="Authorization",
                    code="CALLER_UNPROVEN",
                    fix=f"send 'Authorization: Bearer <token>' with the token the {server}'s operator gave you",
                )
            )
        token = _caller.set(Caller(caller, caller in tokens.sees_all))
        try:
            return await call_next(ctx)
        finally:
            _caller.reset(token)

    return check


def add_callers_argument(p: argparse.ArgumentParser) -> None:
    """`--callers FILE`: the server's callers over HTTP (the journal, the journaling proxy, the coordinator)."""
    p.add_argument(
        "--callers",
        help="HTTP (required there): the callers file, each caller's id and the SHA-256 of its bearer token",
    )


def read_callers(args: argparse.Namespace, who: str) -> CallerTokens | None:
    """The callers over HTTP of the server `who` names (HATP-JRN-17, HATP-MCP-53). Raises ValueError for HTTP
    without --callers (any local process could otherwise act for any caller) or a malformed file; OSError."""
    if args.callers is None:
        if args.transport == "http":
            raise ValueError(
                "--transport http needs --callers FILE (each caller's id and the SHA-256 of its bearer token):"
                f" the {who} does not serve unauthenticated callers over HTTP"
            )
        return None
    return CallerTokens.parse(json.loads(Path(args.callers).read_text()), args.callers)

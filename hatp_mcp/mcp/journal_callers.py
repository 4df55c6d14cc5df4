"""Who sent a journal request over streamable HTTP (HATP-JRN-17): a bearer token per caller, configured by the
operator, and each saga bound to the caller that began it.

The operator's callers file names each caller and the SHA-256 of its token (never the token itself):
`{"callers": {"agent://acme.com/travel-bot": {"tokenSha256": "<64 hex>"}}}`; the caller sends
`Authorization: Bearer <token>` on every HTTP request (`new_token()` makes one, `hash_token` its file entry).
`caller_middleware` is an SDK middleware on the journal's MCPServer: a `tools/call` that arrived over HTTP
without a token of the file is refused with a JSON-RPC error (rule HATP-JRN-17, `CALLER_UNPROVEN`) before any
tool runs, so nothing is begun, registered, reported or undone; an accepted one runs with its caller known
(`current_caller()`), and the journal's tools act on a saga only for the caller its `saga.begin` names
(`NOT_SAGA_OWNER`). Over stdio there is no HTTP request: the parent process that started the journal is its only
caller, and nothing changes. Tokens are compared by their digests in constant time and never logged.
"""

from __future__ import annotations

import argparse
import contextvars
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import AsyncIterator, Mapping
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
    "CallerTokens",
    "add_callers_argument",
    "bearer_client",
    "caller_middleware",
    "current_caller",
    "hash_token",
    "new_token",
    "not_owner",
    "read_callers",
]

RULE = "HATP-JRN-17"
_HEX = re.compile(r"^[0-9a-f]{64}$")
_caller: contextvars.ContextVar[str | None] = contextvars.ContextVar("hatp_journal_caller", default=None)


def new_token() -> str:
    """A fresh bearer token (256 random bits) to hand to one caller."""
    return secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """What the callers file holds for `token`: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class CallerTokens:
    """Each caller's token digest. Build with `parse`."""

    digests: Mapping[str, str]

    @classmethod
    def parse(cls, doc: Any, where: str = "callers file") -> CallerTokens:
        """Raises ValueError naming what is wrong (no callers, a digest that is not 64 hex, one digest twice)."""
        callers = doc.get("callers") if isinstance(doc, Mapping) else None
        if not isinstance(callers, Mapping) or not callers:
            raise ValueError(f'{where}: {{"callers": {{"<caller id>": {{"tokenSha256": "<64 hex>"}}}}}}')
        digests: dict[str, str] = {}
        for name, entry in callers.items():
            digest = entry.get("tokenSha256") if isinstance(entry, Mapping) else None
            if not isinstance(name, str) or not name or not isinstance(digest, str) or not _HEX.fullmatch(digest):
                raise ValueError(f"{where}: callers.{name}.tokenSha256: the SHA-256 of its token, 64 lowercase hex")
            if digest in digests.values():
                raise ValueError(f"{where}: callers.{name}: another caller has the same token")
            digests[name] = digest
        return cls(digests)

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


@asynccontextmanager
async def bearer_client(url: str, token: str) -> AsyncIterator[Client]:
    """An MCP client of the journal at `url` (streamable HTTP) that sends `token` on every request."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def current_caller() -> str | None:
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


def caller_middleware(tokens: CallerTokens) -> ServerMiddleware[Any]:
    """Refuse every `tools/call` over HTTP without a known caller's token; run the others as that caller."""

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        request = ctx.request
        if request is None or ctx.method != "tools/call":  # stdio (the parent), or no tool runs
            return await call_next(ctx)
        headers = getattr(request, "headers", None)
        caller = tokens.caller_of(headers.get("authorization") if headers is not None else None)
        if caller is None:
            raise to_mcp_error(
                HatpError(
                    RULE,
                    "a journal tool over HTTP needs the bearer token of a caller the operator configured; none was"
                    " given, or it is not one of them: nothing was done",
                    path="Authorization",
                    code="CALLER_UNPROVEN",
                    fix="send 'Authorization: Bearer <token>' with the token the journal's operator gave you",
                )
            )
        token = _caller.set(caller)
        try:
            return await call_next(ctx)
        finally:
            _caller.reset(token)

    return check


def add_callers_argument(p: argparse.ArgumentParser) -> None:
    """`--callers FILE`, the journal's and the journaling proxy's callers over HTTP."""
    p.add_argument(
        "--callers",
        help="HTTP (required there): the callers file, each caller's id and the SHA-256 of its bearer token",
    )


def read_callers(args: argparse.Namespace, who: str) -> CallerTokens | None:
    """The callers over HTTP (HATP-JRN-17) of the server `who` names. Raises ValueError for HTTP without --callers
    (any local process could otherwise roll back any saga) or a malformed file; OSError."""
    if args.callers is None:
        if args.transport == "http":
            raise ValueError(
                "--transport http needs --callers FILE (each caller's id and the SHA-256 of its bearer token):"
                f" the {who} does not serve unauthenticated callers over HTTP"
            )
        return None
    return CallerTokens.parse(json.loads(Path(args.callers).read_text()), args.callers)

"""Registering hatp/* methods on an MCP server: the one way every HATP server (participant, gateway, questions,
Directory, coordinator) adds a custom JSON-RPC request to the official SDK's low-level Server.

`add_method` validates the params as received against the method's wire model (HATP-MCP-2), proves a trusted
coordinator sent a state-changing request before anything that keeps state sees it (HATP-TRUST-1..9), runs the
call shielded under the server's gate and returns its wire form; refusals leave through hatp_mcp.mcp.errors only.
`AnyParams` keeps every key the caller sent; `lowlevel_of` is the one place that reaches under an MCPServer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp.server import MCPServer, Server
from pydantic import ConfigDict

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.messages import PrepareRequest
from hatp_mcp.core.model.txn_auth import auth_method
from hatp_mcp.core.model.wire import parse
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import to_mcp_error
from hatp_mcp.runtime.coordinator_trust import TrustedCoordinators

__all__ = ["AnyParams", "add_method", "lowlevel_of", "sync_call"]

M = TypeVar("M", bound=WireModel)


class AnyParams(types.RequestParams):
    """Params of a hatp/* method: every key the caller sent (nulls included), validated later by its model."""

    model_config = ConfigDict(extra="allow")


def lowlevel_of(server: MCPServer | Server[Any]) -> Server[Any]:
    """The low-level Server under an MCPServer (the SDK offers no public accessor; this is the one place)."""
    if isinstance(server, Server):
        return server
    low: Server[Any] = server._lowlevel_server
    return low


def add_method(
    server: Server[Any],
    method: str,
    model: type[M],
    call: Callable[[M], Awaitable[WireModel]],
    gate: anyio.Semaphore,
    trust: TrustedCoordinators | None = None,
    hold: Callable[[M], Awaitable[None]] | None = None,
) -> None:
    """Register `method`: params validated as `model` (HATP-MCP-2), `call` run, its wire form returned.

    With `trust` (every state-changing method), the params as received must prove a trusted coordinator sent them
    (HATP-TRUST-1..9) before `call` runs: a refused request reaches nothing that keeps state (HATP-TRUST-8).
    `hold`, when given, runs next, outside the gate and unshielded: a long poll's wait (a caller that stops waiting
    ends it); it must bound itself."""
    name = auth_method(method)  # hatp/lock/acquire -> lock-acquire (HATP-LOCK-4)

    async def handler(ctx: Any, params: AnyParams) -> dict[str, Any]:
        body = dict(params.model_extra or {})
        try:
            req = parse(model, body, method)
            admitted = trust.admit(name, body, bind=_names_its_plan(req)) if trust is not None else None
            try:
                if hold is not None:
                    await hold(req)
                # Shielded: a caller that stops waiting (timeout, cancel) must not leave a commit half done; the
                # answer is kept and a repeated request gets it (HATP-MCP-6).
                with anyio.CancelScope(shield=True):
                    async with gate:
                        result = await call(req)
            finally:
                if trust is not None and admitted is not None:
                    # HATP-TRUST-5: the binding is durable before any answer leaves (usually already, kept by the
                    # transaction that kept the request's state; synchronous, so no cancellation cuts it short)
                    trust.settle(admitted)
        except HatpError as exc:
            raise to_mcp_error(exc) from exc
        return result.wire()

    server.add_request_handler(method, AnyParams, handler)


def _names_its_plan(req: WireModel) -> bool:
    """A prepare whose planDigest and txnId are its plan's (else the receiver refuses it, and it binds nothing)."""
    if isinstance(req, PrepareRequest):
        return req.plan.txn_id == req.txn_id and req.plan.digest() == req.plan_digest
    return True


def sync_call(fn: Callable[[M], WireModel]) -> Callable[[M], Awaitable[WireModel]]:
    async def call(req: M) -> WireModel:
        return fn(req)

    return call

"""Sending one hatp/* request over an MCP client session and getting back a validated wire object.

`call` sends the params as a plain dict (nulls kept), bounds the wait, strips the SDK's own result keys
(`resultType`, `_meta`), validates the result against its model, and turns every failure into a HatpError through
hatp_mcp.mcp.errors: a JSON-RPC error into its refusal, no answer into TransportFailed. It never retries (callers
decide; every hatp call is idempotent on txnId and branchId) and checks no signatures (participant_client does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp import Client, MCPError
from pydantic import BaseModel, ConfigDict

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.txn_auth import auth_method
from hatp_mcp.core.model.wire import WireError, parse
from hatp_mcp.errors import HatpError, TransportFailed
from hatp_mcp.mcp.errors import cause, from_mcp_error

__all__ = ["SDK_RESULT_KEYS", "HatpRequest", "Signer", "call", "call_raw"]

M = TypeVar("M", bound=WireModel)
Signer = Callable[[str, dict[str, Any]], dict[str, Any]]  # (method, params) -> params with the coordinator's auth
SDK_RESULT_KEYS = frozenset({"resultType", "_meta"})  # added by the SDK on 2026-07-28; never HATP members


class _AnyResult(BaseModel):
    """Keeps every member of a result as sent (validated later by its wire model)."""

    model_config = ConfigDict(extra="allow")


class HatpRequest(types.Request[dict[str, Any], str]):
    """Any hatp/* request. Plain-dict params keep explicit nulls on the wire."""

    method: str
    params: dict[str, Any]


async def call_raw(client: Client, method: str, params: dict[str, Any], read_timeout: float | None) -> dict[str, Any]:
    """Send `method` and return the result object without the SDK's keys.

    Raises HatpError (the server's refusal) or TransportFailed (timeout, closed connection, unreachable).
    """
    try:
        raw = await client.session.send_request(
            HatpRequest(method=method, params=params), _AnyResult, request_read_timeout_seconds=read_timeout
        )
    except MCPError as exc:
        raise from_mcp_error(exc, method) from exc
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
        raise TransportFailed(
            "HATP-MCP-6", f"{method}: connection lost ({cause(exc)})", code="CONNECTION_CLOSED"
        ) from exc
    except ExceptionGroup as group:  # the HTTP transport raises httpx2 errors wrapped in groups
        raise TransportFailed(
            "HATP-MCP-6", f"{method}: server unreachable ({cause(group)})", code="UNREACHABLE"
        ) from group
    return {k: v for k, v in (raw.model_extra or {}).items() if k not in SDK_RESULT_KEYS}


async def call(
    client: Client,
    method: str,
    request: WireModel,
    result_model: type[M],
    read_timeout: float | None = None,
    sign: Signer | None = None,
) -> M:
    """Send `request` as `method`; return the result validated as `result_model`.

    `sign` (a coordinator's RequestSigner.sign): the params go out with the coordinator's `auth` for the method,
    signed now, at send time (spec/mcp-binding.md HATP-TRUST-11).

    Raises HatpError: the server's refusal, TransportFailed (HATP-MCP-6), or HATP-MCP-2 for a result that is
    not a valid `result_model`.
    """
    params = request.wire()
    if sign is not None:
        params = sign(auth_method(method), params)
    body = await call_raw(client, method, params, read_timeout)
    try:
        return parse(result_model, body, f"{method} result")
    except WireError as exc:
        raise HatpError(
            "HATP-MCP-2",
            exc.reason,
            path=exc.path,
            code="BAD_RESULT",
            fix="the server must answer with the wire object the binding names",
        ) from exc

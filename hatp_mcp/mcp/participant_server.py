"""`serve_hatp(server, participant, settings)`: one call that makes an existing MCP server a HATP participant.

It registers hatp/txn/{prepare,quote,commit,abort,compensate,renew,status} (and, only when the operator asks with
`serve_locks`, hatp/lock/{acquire,renew,release}, HATP-MCP-51) as custom JSON-RPC methods on
the server, validates every params object against its wire model, proves that every state-changing request comes
from a coordinator of the participant's trust list (hatp_mcp/runtime/coordinator_trust.py, HATP-TRUST-1..9) before
the participant sees it, calls the participant and returns the result's wire form. Refusals leave through
hatp_mcp.mcp.errors only. The server's ordinary tools and resources are untouched. State is the participant's,
keyed by txnId and branchId, never by connection. This module holds no protocol logic.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
from mcp.server import MCPServer, Server

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.estimate import BoundsRequest
from hatp_mcp.core.model.messages import (
    AbortRequest,
    CommitRequest,
    CompensateRequest,
    LockAcquireRequest,
    LockReleaseRequest,
    LockRenewRequest,
    LockResult,
    PrepareRequest,
    RenewRequest,
    StatusRequest,
)
from hatp_mcp.mcp.extension import HatpSettings, advertise
from hatp_mcp.mcp.hatp_methods import add_method, lowlevel_of, sync_call
from hatp_mcp.mcp.participant_estimate import bounds_handler
from hatp_mcp.runtime.coordinator_trust import TrustedCoordinators
from hatp_mcp.runtime.interfaces import Participant

__all__ = ["LOCK_METHODS", "PARTICIPANT_METHODS", "LockService", "serve_hatp"]

PARTICIPANT_METHODS = (
    "hatp/txn/prepare",
    "hatp/txn/quote",
    "hatp/txn/commit",
    "hatp/txn/abort",
    "hatp/txn/compensate",
    "hatp/txn/renew",
    "hatp/txn/status",
)
LOCK_METHODS = ("hatp/lock/acquire", "hatp/lock/renew", "hatp/lock/release")
M = TypeVar("M", bound=WireModel)


@runtime_checkable
class LockService(Protocol):
    """A participant that hands out fencing-token locks (hatp/lock/*)."""

    def lock_acquire(self, req: LockAcquireRequest) -> LockResult: ...

    def lock_renew(self, req: LockRenewRequest) -> LockResult: ...

    def lock_release(self, req: LockReleaseRequest) -> LockResult: ...


def serve_hatp(
    server: MCPServer | Server[Any],
    participant: Participant,
    settings: HatpSettings,
    *,
    trust: TrustedCoordinators,
    max_concurrent: int = 64,
    serve_locks: bool = False,
) -> None:
    """Make `server` a HATP participant: advertise `settings` and register the hatp/txn/* methods.

    `trust`: the coordinators this participant acts for; every prepare, quote, commit, abort, compensate and renew
    must prove it comes from one (HATP-TRUST-1..9); status and estimate change nothing and need no proof.
    `max_concurrent` bounds how many hatp calls run at once (the SDK runs every request as its own task).
    `serve_locks`: also serve the participant's fencing-token locks (hatp/lock/*), for plans whose branches name
    `locks` (HATP-MCP-51). Like hatp/txn/*, each must prove it comes from a trusted coordinator (HATP-LOCK-4).
    """
    low = lowlevel_of(server)
    # fast_acquire: a request that finds a free place goes straight on, without first giving the event loop a turn
    # (anyio's default yields once there, one more loop iteration per request, on a server that is usually idle);
    # a full gate still queues its waiters first come, first served
    gate = anyio.Semaphore(max_concurrent, fast_acquire=True)
    advertise(low, settings)

    async def quote(req: PrepareRequest) -> WireModel:
        return await participant.prepare(req.model_copy(update={"quote_only": True}))

    add_method(low, "hatp/txn/prepare", PrepareRequest, participant.prepare, gate, trust)
    add_method(low, "hatp/txn/quote", PrepareRequest, quote, gate, trust)
    add_method(low, "hatp/txn/commit", CommitRequest, participant.commit, gate, trust)
    add_method(low, "hatp/txn/abort", AbortRequest, participant.abort, gate, trust)
    add_method(low, "hatp/txn/compensate", CompensateRequest, participant.compensate, gate, trust)
    add_method(low, "hatp/txn/renew", RenewRequest, participant.renew, gate, trust)
    add_method(low, "hatp/txn/status", StatusRequest, participant.status, gate)
    add_method(low, "hatp/txn/estimate", BoundsRequest, bounds_handler(settings), gate)  # HATP-MCP-19
    if serve_locks and isinstance(participant, LockService):  # HATP-LOCK-4: proven like hatp/txn/*
        add_method(low, "hatp/lock/acquire", LockAcquireRequest, sync_call(participant.lock_acquire), gate, trust)
        add_method(low, "hatp/lock/renew", LockRenewRequest, sync_call(participant.lock_renew), gate, trust)
        add_method(low, "hatp/lock/release", LockReleaseRequest, sync_call(participant.lock_release), gate, trust)

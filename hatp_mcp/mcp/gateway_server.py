"""`serve_gateway(server, gateway)`: the Human Gateway as a voter over MCP (spec/mcp-binding.md, HATP-MCP-9/10).

It registers on an MCP server, beside its ordinary tools:

- `hatp/txn/prepare` (PrepareRequest, `branchId` = the approval requirement id): route the requirement to the
  humans (idempotent per txnId and requirement) and answer with a VoteResult: the gateway's signed vote (pending
  with `decideBy`, yes or no) and, once the humans decided, the signed Approval; with `terms` (holds-first) the
  ask opens already bound to them (HATP-MCP-29);
- `hatp/txn/voted` (VotedRequest): the current VoteResult of an ask already made; with `waitSeconds`, a long
  poll that answers once that answer changes, held at most `max_hold` seconds (HATP-MCP-40);
- `hatp/txn/abort` (AbortRequest, `branchId` = the requirement id): withdraw the ask, answer the VoteResult;
- `hatp/txn/estimate` (EstimateRequest): the signed worst case until a decision (HATP-MCP-17);
- `hatp/txn/tighten` (TightenRequest): shrink a pending ask's deadline, bind the terms, answer the VoteResult
  (HATP-MCP-18).

prepare, abort and tighten are first proven to come from a coordinator of the gateway's trust list (HATP-TRUST-1..9).
Everything is GatewayApprover's (hatp_mcp/runtime/gateway/driver.py): this module validates params, maps a missing ask
to a refusal, and leaves refusals through hatp_mcp.mcp.errors only. It holds no protocol logic and no state.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server import MCPServer, Server

from hatp_mcp.core.gateway.ask_ids import approval_ask_id
from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.estimate import EstimateRequest, TightenRequest
from hatp_mcp.core.model.gateway_messages import VotedRequest, VoteResult
from hatp_mcp.core.model.messages import AbortRequest, PrepareRequest
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.extension import HatpSettings, advertise
from hatp_mcp.mcp.hatp_methods import add_method, lowlevel_of
from hatp_mcp.runtime.coordinator_trust import TrustedCoordinators
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.gateway_store import StoredAsk

__all__ = ["APPROVER_METHODS", "MAX_HOLD_SECONDS", "no_such_ask", "serve_gateway", "vote_result"]

# The longest a long poll is held (HATP-MCP-40): under the idle timeouts of common HTTP proxies (often 30-60 s).
MAX_HOLD_SECONDS = 25.0

APPROVER_METHODS = ("hatp/txn/prepare", "hatp/txn/voted", "hatp/txn/abort", "hatp/txn/estimate", "hatp/txn/tighten")


def no_such_ask(txn_id: str, requirement_id: str) -> HatpError:
    """HATP-MCP-10: the gateway never invents a vote for an ask it was not given."""
    return HatpError(
        "HATP-MCP-10",
        f"the gateway has no ask for requirement {requirement_id!r} of transaction {txn_id!r}",
        path="$.requirementId",
        fix="ask first with hatp/txn/prepare (the whole plan, branchId = the requirement id)",
        code="NO_SUCH_ASK",
    )


def vote_result(txn_id: str, requirement_id: str, stored: StoredAsk) -> VoteResult:
    """The wire answer for one stored plan ask (its vote is always set once the gateway answered)."""
    if stored.vote is None:
        raise no_such_ask(txn_id, requirement_id)
    return VoteResult(
        txn_id=txn_id,
        requirement_id=requirement_id,
        state=stored.state,  # type: ignore[arg-type]
        vote=stored.vote,
        approval=stored.evidence,
    )


def serve_gateway(
    server: MCPServer | Server[Any],
    gateway: GatewayApprover,
    *,
    trust: TrustedCoordinators,
    max_concurrent: int = 64,
    max_hold: float = MAX_HOLD_SECONDS,
    max_holding: int = 512,
) -> HatpSettings:
    """Make `server` the gateway's voter: advertise role `gateway` with its public key, register the methods.
    A long poll (`hatp/txn/voted` with `waitSeconds`) is held at most `max_hold` seconds, outside the
    `max_concurrent` gate; beyond `max_holding` held at once, a long poll is answered at once (the caller polls).

    `trust`: the coordinators the gateway asks people for; prepare, abort and tighten must prove they come from
    one (HATP-TRUST-1..9) before any ask is opened, tightened or withdrawn; voted and estimate change nothing.
    Returns the advertised settings.
    """
    low = lowlevel_of(server)
    gate = anyio.Semaphore(max_concurrent)
    holding = [0]

    async def hold(req: VotedRequest) -> None:
        if not req.wait_seconds or holding[0] >= max_holding:
            return
        holding[0] += 1
        try:
            await gateway.watch(approval_ask_id(req.txn_id, req.requirement_id), min(float(req.wait_seconds), max_hold))
        except KeyError:
            return  # refused by `voted` below (HATP-MCP-10), without waiting
        finally:
            holding[0] -= 1

    settings = HatpSettings(roles=["gateway"], keys=[gateway.key.public_jwk()])
    advertise(low, settings)

    async def current(txn_id: str, requirement_id: str) -> VoteResult:
        try:
            stored = await gateway.current(approval_ask_id(txn_id, requirement_id))
        except KeyError:
            raise no_such_ask(txn_id, requirement_id) from None
        return vote_result(txn_id, requirement_id, stored)

    async def prepare(req: PrepareRequest) -> WireModel:
        if req.quote_only:
            raise HatpError(
                "HATP-MCP-9",
                "the gateway gives no quotes: it asks humans (hatp/txn/prepare without quoteOnly)",
                path="$.quoteOnly",
                code="UNSUPPORTED",
            )
        if req.plan_digest != req.plan.digest():
            raise HatpError(
                "HATP-MCP-9",
                f"planDigest {req.plan_digest} is not the digest of the plan sent ({req.plan.digest()})",
                path="$.planDigest",
                fix="send the plan and its own digest",
                code="PLAN_MISMATCH",
            )
        await gateway.ask(req.plan, req.branch_id, req.terms)  # bound to the terms before anyone is notified
        return await current(req.txn_id, req.branch_id)

    async def voted(req: VotedRequest) -> WireModel:
        return await current(req.txn_id, req.requirement_id)

    async def abort(req: AbortRequest) -> WireModel:
        stored = gateway.store.get(approval_ask_id(req.txn_id, req.branch_id))
        if stored is None:
            raise no_such_ask(req.txn_id, req.branch_id)
        digest = stored.record.ask.plan_digest if stored.record else (stored.vote or {}).get("planDigest")
        if digest != req.plan_digest:
            raise HatpError(
                "HATP-MCP-10",
                f"the ask is about plan {digest}, not {req.plan_digest}",
                path="$.planDigest",
                code="PLAN_MISMATCH",
            )
        await gateway.withdraw(req.txn_id, req.branch_id)
        return await current(req.txn_id, req.branch_id)

    async def estimate(req: EstimateRequest) -> WireModel:
        if req.plan_digest != req.plan.digest() or req.txn_id != req.plan.txn_id:
            raise HatpError(
                "HATP-MCP-17",
                f"planDigest {req.plan_digest} / txnId {req.txn_id} do not name the plan sent ({req.plan.digest()})",
                path="$.planDigest",
                fix="send the plan, its own digest and its txnId",
                code="PLAN_MISMATCH",
            )
        return await gateway.estimate(req.plan, req.requirement_id)

    async def tighten(req: TightenRequest) -> WireModel:
        stored = gateway.store.get(approval_ask_id(req.txn_id, req.requirement_id))
        if stored is None:
            raise no_such_ask(req.txn_id, req.requirement_id)
        digest = stored.record.ask.plan_digest if stored.record else (stored.vote or {}).get("planDigest")
        if digest != req.plan_digest:
            raise HatpError(
                "HATP-MCP-18",
                f"the ask is about plan {digest}, not {req.plan_digest}",
                path="$.planDigest",
                code="PLAN_MISMATCH",
            )
        terms = ApprovalTerms(decide_by=req.decide_by, holds=req.holds)
        await gateway.tighten(req.txn_id, req.requirement_id, terms)
        return await current(req.txn_id, req.requirement_id)

    add_method(low, "hatp/txn/prepare", PrepareRequest, prepare, gate, trust)
    add_method(low, "hatp/txn/estimate", EstimateRequest, estimate, gate)
    add_method(low, "hatp/txn/tighten", TightenRequest, tighten, gate, trust)
    add_method(low, "hatp/txn/voted", VotedRequest, voted, gate, hold=hold)
    add_method(low, "hatp/txn/abort", AbortRequest, abort, gate, trust)
    return settings

"""`hatp/txn/estimate` on a participant (spec/mcp-binding.md HATP-MCP-19): the bounds it advertises for one
branch's operation, so a coordinator can compare them with the plan's numbers before it picks a mode.

`operation_bounds` answers from the server's own advertisement (HatpSettings); `bounds_handler` is the method
serve_hatp registers; `participant_bounds` is the coordinator's side over an MCP client. No state, no
protocol logic beyond looking the operation up: a missing bound stays missing (unbounded), never a default.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp import Client

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.estimate import BoundsRequest, OperationBounds
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call
from hatp_mcp.mcp.extension import HatpSettings

__all__ = ["AdvertisedBounds", "bounds_handler", "operation_bounds", "participant_bounds"]


def operation_bounds(req: BoundsRequest, settings: HatpSettings) -> OperationBounds:
    """HATP-MCP-19: the advertised bounds of the named branch's operation. Raises HatpError HATP-MCP-19
    (PLAN_MISMATCH, NOT_FOUND for a branch the plan lacks, UNSUPPORTED for an operation not served)."""
    if req.plan_digest != req.plan.digest() or req.txn_id != req.plan.txn_id:
        raise HatpError(
            "HATP-MCP-19",
            f"planDigest {req.plan_digest} / txnId {req.txn_id} do not name the plan sent",
            path="$.planDigest",
            code="PLAN_MISMATCH",
        )
    try:
        branch = req.plan.branch(req.branch_id)
    except KeyError:
        raise HatpError(
            "HATP-MCP-19", f"the plan has no branch {req.branch_id!r}", path="$.branchId", code="NOT_FOUND"
        ) from None
    info = settings.operations.get(branch.operation)
    if info is None or info.tier != branch.tier:
        offered = f"offers it as {info.tier}" if info is not None else "does not offer it"
        raise HatpError(
            "HATP-MCP-19",
            f"operation {branch.operation!r} ({branch.tier}): this participant {offered}",
            path="$.plan.branches",
            code="UNSUPPORTED",
        )
    return OperationBounds(
        txn_id=req.txn_id,
        branch_id=req.branch_id,
        operation=branch.operation,
        tier=branch.tier,
        max_lease_seconds=info.max_lease_seconds,
        max_hold_seconds=info.max_hold_seconds,
        max_duration_seconds=info.max_duration_seconds,
    )


def bounds_handler(settings: HatpSettings) -> Callable[[BoundsRequest], Awaitable[WireModel]]:
    """The `hatp/txn/estimate` handler of a participant advertising `settings` (serve_hatp registers it)."""

    async def estimate(req: BoundsRequest) -> WireModel:
        return operation_bounds(req, settings)

    return estimate


async def participant_bounds(
    client: Client, plan: Plan, branch_id: str, read_timeout: float | None = 30.0
) -> OperationBounds:
    """Ask a participant for one branch's bounds. Raises HatpError (its refusal) or TransportFailed; a result
    about another branch is refused (HATP-MCP-19, EVIDENCE_MISMATCH)."""
    req = BoundsRequest(txn_id=plan.txn_id, branch_id=branch_id, plan_digest=plan.digest(), plan=plan)
    got = await call(client, "hatp/txn/estimate", req, OperationBounds, read_timeout)
    if (got.txn_id, got.branch_id) != (plan.txn_id, branch_id):
        raise HatpError("HATP-MCP-19", "the bounds name another branch", path="$.branchId", code="EVIDENCE_MISMATCH")
    return got


class AdvertisedBounds:
    """One participant's bounds, asked once per connection and (operation, tier), then answered for each branch.

    Bounds are what the server advertises, not something about one transaction; a new connection (a restarted
    server may advertise others) asks again. A stale answer can only affect the begin-time check: the participant
    still caps every lease it grants at prepare.
    """

    def __init__(self) -> None:
        self._of: object = None
        self._known: dict[tuple[str, str], OperationBounds] = {}

    def known(self, client: Client, plan: Plan, branch_id: str) -> OperationBounds | None:
        """The bounds for `branch_id` from what `client`'s connection already advertised, with no call; None when
        they were not asked on this connection yet. Raises KeyError for a branch the plan lacks."""
        if client is not self._of:
            return None
        branch = plan.branch(branch_id)
        known = self._known.get((branch.operation, branch.tier))
        return None if known is None else known.model_copy(update={"txn_id": plan.txn_id, "branch_id": branch_id})

    async def get(
        self, client: Client, plan: Plan, branch_id: str, read_timeout: float | None = 30.0
    ) -> OperationBounds:
        """Raises like participant_bounds."""
        known = self.known(client, plan, branch_id)
        if known is not None:
            return known
        if client is not self._of:
            self._of, self._known = client, {}
        branch = plan.branch(branch_id)
        got = await participant_bounds(client, plan, branch_id, read_timeout)
        self._known[(branch.operation, branch.tier)] = got
        return got

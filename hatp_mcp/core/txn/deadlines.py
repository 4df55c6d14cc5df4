"""The approval deadline and the holds' leases: what bounds the human's decision, when a lease is renewed, and
what a receipt's lease and horizon change. Pure: takes the machine's data and `now`, returns commands; reads no
clock, does no IO.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Receipt
from hatp_mcp.core.txn.abort import abort
from hatp_mcp.core.txn.data import Txn, arm
from hatp_mcp.core.txn.events import Command, Record, SendRenew, TxnState
from hatp_mcp.core.txn.terms import tighten

__all__ = ["DECIDING", "note_lease", "renew", "set_deadline"]

T = TxnState
DECIDING = frozenset({T.QUOTING, T.PREPARING, T.APPROVING})


def set_deadline(t: Txn, now: datetime, candidate: datetime | None, why: str) -> list[Command]:
    """The approval deadline: the plan's and requirements' decideBy, the approver's, and what the holds allow."""
    plan, a = t.plan, t.approvals
    if not plan.approvals:
        return []
    options = [parse_ts(x) for x in [plan.deadlines.decide_by, *(r.decide_by for r in plan.approvals)] if x is not None]
    if candidate is not None:
        options.append(candidate)
    if plan.deadlines.commit_by is not None and t.timing.commit is not None:  # leave room to commit by then
        options.append(parse_ts(plan.deadlines.commit_by) - timedelta(seconds=t.timing.commit))
    if t.holds.horizons and t.mode in ("parallel", "holds-first") and t.timing.commit is not None:
        options.append(min(t.holds.horizons.values()) - timedelta(seconds=t.timing.commit))
    if a.deadline is not None:
        options.append(a.deadline)
    if not options:
        return []
    new = min(options)
    if new == a.deadline:
        return []
    a.deadline = new
    out: list[Command] = [Record(event="approval.deadline", body={"decideBy": format_ts(new), "why": why})]
    if a.asked and now >= new and any(v != "yes" for v in a.status.values()):
        return out + abort(t, now, "APPROVAL_TIMEOUT", "the approval deadline passed (HATP-TXN-7)")
    return out + arm(t, "deadline", new) + tighten(t, now)  # a shorter deadline reaches the gateway (MODE-7)


def note_lease(t: Txn, branch_id: str, receipt: Receipt, now: datetime) -> list[Command]:
    """A receipt's lease and horizon: arm the renewal, and let a shrunken horizon shorten the deadline."""
    h = t.holds
    if receipt.lease_expires_at is None:
        return []
    expires = parse_ts(receipt.lease_expires_at)
    horizon = parse_ts(receipt.hold_horizon) if receipt.hold_horizon else expires
    h.leases[branch_id] = expires
    shrank = branch_id in h.horizons and horizon < h.horizons[branch_id]
    h.horizons[branch_id] = horizon
    out: list[Command] = []
    if expires < horizon:
        margin = min(timedelta(seconds=t.config.renew_before_seconds), (expires - now) / 2)
        out += arm(t, f"renew:{branch_id}", expires - margin)
    if t.state in DECIDING or shrank:
        out += set_deadline(t, now, None, f"hold {branch_id} horizon" + (" shrank" if shrank else ""))
    return out


def renew(t: Txn, branch_id: str) -> SendRenew:
    b = t.branches[branch_id]
    t.holds.renewing.add(branch_id)
    return SendRenew(branch_id=branch_id, lease_seconds=b.lease_seconds or t.config.renew_before_seconds * 4)

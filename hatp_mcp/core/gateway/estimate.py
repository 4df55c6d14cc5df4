"""The gateway's worst case for one approval requirement: how long until a decision, as the gateway will actually
route and escalate it (spec/gateway.md HATP-GW-28/29). Pure: takes `now`, returns an unsigned Estimate.

The estimate runs the gateway's own state machine (core/gateway/machine.py: `open_approval`, then `tick` at each wakeup)
on a copy of the ask in which nobody decides: every asked person lets their card SLA run out and is replaced as
the gateway would replace them (their delegate first, then the next ranked person). The worst case is when the
last person so reached has had their full SLA, and never later than the deadline the gateway signs. Declines and
decisions only end asks or move replacements earlier, so no run of the real ask ends later than this.

The plan's `approvals[].chain` is the agent's claim: it is never used for routing nor trusted as a bound; links
that understate a named person's card SLA are reported (`understated`). Must not sign, persist or read a clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hatp_mcp.core.gateway import machine as core
from hatp_mcp.core.gateway.address import parse_address
from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.estimate import Estimate, EstimateStep
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.errors import HatpError

__all__ = ["MAX_STEPS", "escalation_order", "estimate_requirement", "understated_links"]

# A bound on the simulation: an organisation with more people than this is estimated at its deadline.
MAX_STEPS = 10_000


def _seconds(later: datetime, now: datetime) -> int:
    """Whole seconds from `now` to `later`, rounded up (a worst case never rounds down), never below zero."""
    delta = later - now
    whole = int(delta.total_seconds())
    if timedelta(seconds=whole) < delta:
        whole += 1
    return max(0, whole)


def escalation_order(rec: AskRecord, now: datetime) -> tuple[list[EstimateStep], datetime]:
    """Run `rec` (as just opened at `now`) with nobody deciding: the people asked, in order, and when the last
    of them runs out of time (capped by the ask's signed deadline). An ask closed at opening ends at `now`."""
    deadline = parse_ts(rec.ask.decide_by)
    if core.state_of(rec) is not core.AskState.PENDING:
        return [], now
    # Quorum 1 while simulating: the real ask may exhaust earlier (too few left for the quorum) only when
    # someone decided, so counting to the last person reachable is the safe side.
    sim = rec.model_copy(update={"quorum_required": 1})
    for _ in range(MAX_STEPS):
        wake = core.next_wakeup(sim)
        if wake is None or wake >= deadline:
            break
        sim = core.tick(sim, wake)
    else:
        return _steps(sim, now), deadline
    steps = _steps(sim, now)
    last = max((now + timedelta(seconds=s.due_after_seconds) for s in steps), default=now)
    return steps, min(last, deadline)


def _steps(sim: AskRecord, now: datetime) -> list[EstimateStep]:
    asked = [(parse_ts(s.asked_at), i, s) for i, s in enumerate(sim.seats) if s.asked_at is not None]
    asked.sort(key=lambda t: (t[0], t[1]))
    return [
        EstimateStep(
            human=s.human,
            asked_after_seconds=_seconds(at, now),
            due_after_seconds=_seconds(parse_ts(s.due_at), now) if s.due_at is not None else _seconds(at, now),
            delegate_for=s.delegate_for,
        )
        for at, _i, s in asked
    ]


def understated_links(plan: Plan, requirement_id: str, directory: Directory) -> list[str]:
    """HATP-GW-29: JSON paths of the requirement's chain links whose `decideSeconds` is below the card SLA of a
    person the link names (the slowest member, for a group), or that name nobody the Directory knows."""
    idx = next((i for i, r in enumerate(plan.approvals) if r.id == requirement_id), None)
    if idx is None:
        return []
    out: list[str] = []
    for j, link in enumerate(plan.approvals[idx].chain):
        path = f"approvals[{idx}].chain[{j}]"
        try:
            members = directory.members(parse_address(link.address, f"{path}.address"))
        except HatpError:
            members = []
        if not members:
            out.append(f"{path}.address")
        elif link.decide_seconds is not None and link.decide_seconds < max(c.sla.decide_seconds for c in members):
            out.append(f"{path}.decideSeconds")
    return out


def estimate_requirement(
    plan: Plan,
    requirement_id: str,
    directory: Directory,
    *,
    gateway: str,
    now: datetime,
    default_window: timedelta = timedelta(hours=24),
) -> Estimate:
    """HATP-GW-28: the unsigned Estimate for one requirement of `plan` at `now`, routed exactly as `ask` would.

    Raises HatpError as core.gateway.open_approval does (HATP-GW-1/2/3, HATP-ADDR-1..4, HATP-GW-11 for an
    unknown requirement): a requirement the gateway would refuse has no estimate, it would be voted no at once.
    """
    rec = core.open_approval(plan, requirement_id, directory, gateway=gateway, now=now, default_window=default_window)
    steps, end = escalation_order(rec, now)
    return Estimate(
        txn_id=plan.txn_id,
        requirement_id=requirement_id,
        plan_digest=plan.digest(),
        gateway=gateway,
        worst_seconds=_seconds(end, now),
        order=steps,
        decide_by=rec.ask.decide_by,
        understated=understated_links(plan, requirement_id, directory),
        issued_at=format_ts(now),
    )

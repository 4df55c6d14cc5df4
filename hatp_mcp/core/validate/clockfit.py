"""Clock fit: the worst case before commit of a HATP plan, per mode, in the plan's own numbers. Pure.

The arithmetic is normative (spec/validation.md, section "Clock fit"); in short, with every number in seconds:

- d(b): a branch's `maxDurationSeconds`, the worst case of one call (absent: unbounded).
- P = sum of d(b) over all branches (prepare phase), C = the same sum again (commit phase). A sum is an upper
  bound for any order the coordinator runs the calls in, concurrent or not.
- H: the human's worst case, the largest over the approval requirements of the smallest bound that exists:
  the sum of the chain's `decideSeconds` (in order; an empty chain or a link without one is unbounded), the
  requirement's `decideBy - now`, the plan's `deadlines.decideBy - now`. No requirement: H = 0.
- horizon: the shortest `holdHorizonSeconds` over hold branches (a hold without one: its `leaseSeconds`, since
  no renewal is promised). No hold: nothing expires before commit.

Modes: parallel (holds placed while the human decides) needs max(P, H) + C <= horizon; holds-first (holds
placed, then the approver gets the time left) needs a bounded H with P + H + C <= horizon, and the coordinator
gives the approver `horizon - P - C` seconds; approval-first (the human decides on quotes, holds placed after)
needs P + C <= horizon. Undo windows open at commit, so every compensate branch needs C <= its window, in every
mode. `None` stands for unbounded throughout. This module never reads the clock: `now` is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import ApprovalRequirement, Plan

__all__ = ["MODES", "Bound", "ClockFit", "call_bound", "clock_fit", "human_bound", "seconds_text"]

MODES: tuple[str, ...] = ("parallel", "holds-first", "approval-first")


@dataclass(frozen=True, slots=True, kw_only=True)
class Bound:
    """A worst case in seconds (`None`: unbounded) and, when unbounded, the fields whose absence made it so."""

    seconds: int | None
    missing: tuple[str, ...] = ()

    @property
    def bounded(self) -> bool:
        return self.seconds is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockFit:
    """The clock arithmetic of one plan at `now`: the numbers, and the modes whose worst case fits.

    `horizon` is None when the plan holds nothing; `tightest` names the hold branch that sets it.
    `approval_window` is what holds-first gives the approver after the holds are placed (None: unlimited).
    `worst` maps each mode to its worst case before commit ends, counted from the first hold (None: unbounded).
    `fits` lists the modes whose holds survive their worst case, in the order parallel, holds-first,
    approval-first. `undo_ok` is False when some compensate branch's undo window is shorter than the commit phase
    (or either is unbounded); that is mode-independent and `validate` reports it as its own rule (HATP-VAL-12).
    """

    prepare: Bound
    commit: Bound
    human: Bound
    horizon: int | None
    tightest: str | None
    approval_window: int | None
    worst: dict[str, int | None]
    fits: tuple[str, ...]
    undo_ok: bool

    def choose(self) -> str | None:
        """The mode `auto` resolves to: the first that fits (parallel is fastest), or None when none does."""
        return self.fits[0] if self.fits else None


def seconds_text(value: int | None) -> str:
    return "unbounded" if value is None else f"{value}s"


def _add(*parts: int | None) -> int | None:
    total = 0
    for p in parts:
        if p is None:
            return None
        total += p
    return total


def call_bound(plan: Plan) -> Bound:
    """The sum of every branch's maxDurationSeconds: the worst case of the prepare phase, and of the commit phase."""
    total = 0
    for b in plan.branches:
        d = b.max_duration_seconds
        if d is None:
            missing = tuple(
                f"branches[{i}].maxDurationSeconds"
                for i, other in enumerate(plan.branches)
                if other.max_duration_seconds is None
            )
            return Bound(seconds=None, missing=missing)
        total += d
    return Bound(seconds=total)


def _until(ts: str, now: datetime) -> int:
    """Whole seconds from now to a wire timestamp, never below zero (a past deadline leaves no time)."""
    return max(0, int((parse_ts(ts) - now).total_seconds()))


def human_bound(plan: Plan, req: ApprovalRequirement, index: int, now: datetime) -> Bound:
    """One requirement's worst case: the smallest of the chain's SLA sum, its decideBy and the plan's decideBy."""
    bounds: list[int] = []
    if req.chain:
        chain_sum = 0
        for c in req.chain:
            if c.decide_seconds is None:
                break
            chain_sum += c.decide_seconds
        else:  # every link has its SLA
            bounds.append(chain_sum)
    if req.decide_by is not None:
        bounds.append(_until(req.decide_by, now))
    plan_decide_by = plan.deadlines.decide_by
    if plan_decide_by is not None:
        bounds.append(_until(plan_decide_by, now))
    if bounds:
        return Bound(seconds=min(bounds))
    # unbounded: every bound was absent; name them, in order (the messages are built only here)
    missing: list[str] = []
    if not req.chain:
        missing.append(f"approvals[{index}].chain")
    else:
        missing.extend(
            f"approvals[{index}].chain[{j}].decideSeconds" for j, c in enumerate(req.chain) if c.decide_seconds is None
        )
    missing.append(f"approvals[{index}].decideBy")
    missing.append("deadlines.decideBy")
    return Bound(seconds=None, missing=tuple(missing))


def _human(plan: Plan, now: datetime) -> Bound:
    worst = 0
    missing: list[str] = []
    for i, req in enumerate(plan.approvals):
        b = human_bound(plan, req, i, now)
        if b.seconds is None:
            missing.extend(m for m in b.missing if m not in missing)
        else:
            worst = max(worst, b.seconds)
    if missing:
        return Bound(seconds=None, missing=tuple(missing))
    return Bound(seconds=worst)


def _horizon(plan: Plan) -> tuple[int | None, str | None]:
    best: int | None = None
    which: str | None = None
    for b in plan.branches:
        if b.tier != "hold":
            continue
        h = b.hold_horizon_seconds if b.hold_horizon_seconds is not None else b.lease_seconds
        if h is None:  # a hold with no lease at all: tier coherence refuses it; here it protects nothing
            h = 0
        if best is None or h < best:
            best, which = h, b.branch_id
    return best, which


def _le(worst: int | None, horizon: int | None) -> bool:
    if horizon is None:
        return True  # nothing held: nothing can expire before commit
    return worst is not None and worst <= horizon


def clock_fit(plan: Plan, now: datetime) -> ClockFit:
    """Compute the clock fit of `plan` at `now`. Pure; raises nothing for a plan that parsed."""
    prepare = call_bound(plan)
    commit = prepare
    human = _human(plan, now)
    horizon, tightest = _horizon(plan)
    p, c, h = prepare.seconds, commit.seconds, human.seconds
    # sums of bounds, None (unbounded) as soon as one part is
    pc = parallel = holds_first = None
    if p is not None and c is not None:
        pc = p + c
        if h is not None:
            parallel, holds_first = max(p, h) + c, p + h + c
    worst: dict[str, int | None] = {"parallel": parallel, "holds-first": holds_first, "approval-first": pc}
    approval_window = None if horizon is None or pc is None else horizon - pc
    undo_ok = True
    for b in plan.branches:
        if b.tier == "compensate" and (b.undo_window_seconds is None or c is None or c > b.undo_window_seconds):
            undo_ok = False
            break
    fits = tuple(m for m in MODES if _le(worst[m], horizon))
    return ClockFit(
        prepare=prepare,
        commit=commit,
        human=human,
        horizon=horizon,
        tightest=tightest,
        approval_window=approval_window,
        worst=worst,
        fits=fits,
        undo_ok=undo_ok,
    )

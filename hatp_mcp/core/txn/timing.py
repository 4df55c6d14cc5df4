"""Which mode a transaction runs in, chosen by the clock, and the commit order. Pure: takes `now`, reads no clock.

The arithmetic is the validator's (hatp_mcp.core.validate.clockfit, normative in spec/validation.md section 2): P and C
are the prepare and commit phases' worst cases, H the approver chain's, `horizon` the shortest hold horizon.
This module only turns it into a decision at begin: `auto` takes the first mode that fits, an explicit mode that
does not fit is refused. A missing bound is unbounded, and unbounded never fits. With the gateway's estimate
(`human_worst`, `mode_fits`), the human's worst case is the worse of the plan's declared bound and the gateway's
signed estimate, per requirement (no estimate: unbounded, fail closed; spec/coordinator.md HATP-MODE-5/6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.validate.clockfit import MODES, clock_fit, human_bound, seconds_text
from hatp_mcp.errors import HatpError

__all__ = ["Timing", "abort_order", "choose_mode", "commit_order", "human_worst", "mode_fits", "timing"]


@dataclass(frozen=True, slots=True)
class Timing:
    """The numbers the coordinator keeps from the clock fit (seconds; None is unbounded)."""

    approval_worst: int | None
    hold_horizon: int | None
    commit: int | None
    prepare: int | None
    fits: tuple[str, ...]

    def wire(self) -> dict[str, object]:
        return {
            "approvalWorst": self.approval_worst,
            "holdHorizon": self.hold_horizon,
            "commit": self.commit,
            "prepare": self.prepare,
            "fits": list(self.fits),
        }

    def numbers(self) -> str:
        return (
            f"prepare {seconds_text(self.prepare)}, approver {seconds_text(self.approval_worst)}, commit "
            f"{seconds_text(self.commit)}, shortest hold horizon {seconds_text(self.hold_horizon)}"
        )


def _worse(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else max(a, b)


def human_worst(plan: Plan, now: datetime, estimates: Mapping[str, int | None]) -> int | None:
    """HATP-MODE-5: the largest over the requirements of max(plan's bound, gateway's estimate); a requirement
    without an estimate (or an unbounded one) is unbounded. No requirement: 0."""
    worst: int | None = 0
    for i, req in enumerate(plan.approvals):
        each = _worse(human_bound(plan, req, i, now).seconds, estimates.get(req.id))
        worst = _worse(worst, each)
    return worst


def mode_fits(prepare: int | None, commit: int | None, human: int | None, horizon: int | None) -> tuple[str, ...]:
    """The clock fit's arithmetic (spec/validation.md section 2) with a given human worst case."""

    def add(*parts: int | None) -> int | None:
        return None if any(p is None for p in parts) else sum(p or 0 for p in parts)

    worst = {
        "parallel": None if prepare is None or human is None else add(max(prepare, human), commit),
        "holds-first": add(prepare, human, commit),
        "approval-first": add(prepare, commit),
    }
    return tuple(m for m in MODES if horizon is None or (worst[m] is not None and (worst[m] or 0) <= horizon))


def timing(plan: Plan, now: datetime) -> Timing:
    fit = clock_fit(plan, now)
    return Timing(fit.human.seconds, fit.horizon, fit.commit.seconds, fit.prepare.seconds, fit.fits)


def choose_mode(plan: Plan, now: datetime, estimates: Mapping[str, int | None] | None = None) -> tuple[str, Timing]:
    """The mode to run. `estimates` (requirementId -> the gateway's signed worstSeconds; a requirement missing
    from it has none, so is unbounded) makes the human's worst case the worse of the plan's bound and the
    gateway's (HATP-MODE-5); None uses the plan's numbers alone.

    Raises HatpError HATP-MODE-1 (auto: nothing fits), HATP-MODE-2 (explicit: does not fit by the plan's own
    numbers) or HATP-MODE-6 (explicit: fits by the plan's numbers, not with the gateway's estimate)."""
    t = timing(plan, now)
    if estimates is not None:
        human = human_worst(plan, now, estimates)
        t_est = Timing(
            human, t.hold_horizon, t.commit, t.prepare, mode_fits(t.prepare, t.commit, human, t.hold_horizon)
        )
        if plan.mode != "auto" and plan.mode in t.fits and plan.mode not in t_est.fits:
            raise HatpError(
                "HATP-MODE-6",
                f"mode {plan.mode} fits by the plan's numbers but not with the gateway's estimate: {t_est.numbers()}",
                path="$.mode",
                code="MODE_DOES_NOT_FIT",
                fix=f"use mode auto or one that fits ({', '.join(t_est.fits) or 'none does'}), ask for longer holds, "
                "or route the approval to people who decide sooner",
            )
        t = t_est
    if plan.mode != "auto":
        if plan.mode not in t.fits:
            raise HatpError(
                "HATP-MODE-2",
                f"mode {plan.mode} cannot fit inside the holds: {t.numbers()}",
                path="$.mode",
                code="MODE_DOES_NOT_FIT",
                fix=f"use mode auto or one that fits ({', '.join(t.fits) or 'none does'}), bound every "
                "decideSeconds and maxDurationSeconds, or ask for longer holds",
            )
        return plan.mode, t
    if not t.fits:
        raise HatpError(
            "HATP-MODE-1",
            f"no mode fits inside the holds: {t.numbers()}",
            path="$.mode",
            code="MODE_DOES_NOT_FIT",
            fix="bound maxDurationSeconds on every branch and ask for hold horizons longer than the commit time",
        )
    return t.fits[0], t


def commit_order(plan: Plan) -> list[str]:
    """Compensate branches (plan order), then the final branch, then the holds (HATP-TXN-5)."""
    rank = {"compensate": 0, "final": 1, "hold": 2}
    return [b.branch_id for b in sorted(plan.branches, key=lambda b: rank[b.tier])]


def abort_order(plan: Plan) -> list[str]:
    """The reverse of the commit order: holds released first, then what ran is undone, last first."""
    return list(reversed(commit_order(plan)))

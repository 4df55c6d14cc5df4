"""Does the plan assume more time than its participants offer? The check of HATP-MODE-9, made at begin with each
branch's bounds as its participant states them (`hatp/txn/estimate`, spec/mcp-binding.md HATP-MCP-19).

Pure: takes the bounds and `now`, reads no clock and calls nobody; the runtime asks the participants. Fail
closed: a branch without bounds (the participant did not answer, refused, or named another operation) is
refused, never passed; a bound the participant does not state is one it does not cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from hatp_mcp.core.model.estimate import OperationBounds
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.txn.timing import Timing, choose_mode
from hatp_mcp.errors import HatpError

__all__ = ["RULE", "check_participant_bounds", "with_participant_durations"]

RULE = "HATP-MODE-9"


def _refuse(reason: str, path: str, fix: str, code: str = "BOUNDS_EXCEEDED") -> HatpError:
    return HatpError(RULE, reason, path=path, fix=fix, code=code)


def _larger(planned: int | None, offered: int | None) -> int | None:
    return None if planned is None or offered is None else max(planned, offered)


def with_participant_durations(plan: Plan, bounds: Mapping[str, OperationBounds]) -> Plan:
    """The plan with each branch's `maxDurationSeconds` the larger of the plan's and its participant's (None, i.e.
    unbounded, when either is): the numbers the clock fit must hold with. Only for the fit: its digest differs."""
    branches = [
        b.model_copy(
            update={"max_duration_seconds": _larger(b.max_duration_seconds, bounds[b.branch_id].max_duration_seconds)}
        )
        if b.branch_id in bounds
        else b
        for b in plan.branches
    ]
    return plan.model_copy(update={"branches": branches})


def check_participant_bounds(
    plan: Plan,
    mode: str,
    bounds: Mapping[str, OperationBounds],
    now: datetime,
    estimates: Mapping[str, int | None] | None = None,
) -> tuple[str, Timing] | None:
    """HATP-MODE-9: refuse (HatpError, nothing changed) a plan whose branch has no bounds from its participant,
    names another operation or tier, declares a `leaseSeconds` / `holdHorizonSeconds` beyond the participant's
    `maxLeaseSeconds` / `maxHoldSeconds`, or declares no `maxDurationSeconds` where the participant states one.
    Then the clock fit once each call may take the larger of the two durations: `mode` still fits -> None (keep
    it); it does not, and the plan asked for `auto` -> (mode, timing) chosen again with those durations (the caller
    switches to it); an explicit mode that does not fit, or no mode at all -> refused."""
    for i, b in enumerate(plan.branches):
        path = f"$.branches[{i}]"
        got = bounds.get(b.branch_id)
        if got is None:
            raise _refuse(
                f"branch {b.branch_id!r}: participant {b.participant} stated no bounds (no answer or a refusal)",
                path,
                "make the participant answer hatp/txn/estimate for this operation, then begin again",
                code="NO_BOUNDS",
            )
        if (got.operation, got.tier) != (b.operation, b.tier):
            raise _refuse(
                f"branch {b.branch_id!r}: the bounds are for {got.operation} ({got.tier}), "
                f"not {b.operation} ({b.tier})",
                f"{path}.operation",
                "ask the participant that serves this operation",
                code="EVIDENCE_MISMATCH",
            )
        for field, planned, offered, name in (
            ("leaseSeconds", b.lease_seconds, got.max_lease_seconds, "maxLeaseSeconds"),
            ("holdHorizonSeconds", b.hold_horizon_seconds, got.max_hold_seconds, "maxHoldSeconds"),
        ):
            if planned is not None and offered is not None and planned > offered:
                raise _refuse(
                    f"branch {b.branch_id!r} assumes {field} {planned} but {b.participant} gives at most {offered}"
                    f" ({name})",
                    f"{path}.{field}",
                    f"declare {field} <= {offered}, or use a participant that holds longer",
                )
        if b.max_duration_seconds is None and got.max_duration_seconds is not None:
            raise _refuse(
                f"branch {b.branch_id!r} declares no maxDurationSeconds; {b.participant} states calls take up to "
                f"{got.max_duration_seconds} s",
                f"{path}.maxDurationSeconds",
                f"declare maxDurationSeconds >= {got.max_duration_seconds}",
                code="UNBOUNDED",
            )
    # the fit as if the clock chose, so an explicit mode that no longer fits is named beside the ones that do
    adjusted = with_participant_durations(plan, bounds).model_copy(update={"mode": "auto"})
    try:
        chosen, t = choose_mode(adjusted, now, estimates)
    except HatpError as exc:
        raise _refuse(
            f"with the participants' call durations the plan fits no mode: {exc.reason}",
            "$.branches",
            "declare each branch's maxDurationSeconds as its participant states it, or allow more time",
            code="MODE_DOES_NOT_FIT",
        ) from exc
    if mode in t.fits:
        return None
    if plan.mode == "auto":  # the plan left the mode to the clock: these are the clock's numbers now
        return chosen, t
    raise _refuse(
        f"mode {mode} does not fit with the participants' call durations: {t.numbers()}",
        "$.mode",
        f"use a mode that fits ({', '.join(t.fits) or 'none does'}) or allow more time",
        code="MODE_DOES_NOT_FIT",
    )

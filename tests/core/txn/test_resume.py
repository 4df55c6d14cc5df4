"""A replacement takes up the approving phase only where its record waits for a human alone (HATP-TXN-22), and
only while the holds still stand and the approval deadline has not passed (HATP-TXN-23)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from demo.trip_world import trip_plan
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.data import Approving
from hatp_mcp.core.txn.events import Arm, Decide, Poll, Record, SendAbort, Start, TxnState
from hatp_mcp.core.txn.machine import Coordinator
from hatp_mcp.core.txn.resume import approving_point

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
PLAN = trip_plan(NOW, "txn-resume")
Events = list[dict[str, Any]]


def at(seconds: float) -> str:
    return format_ts(NOW + timedelta(seconds=seconds))


def waiting(mode: str = "parallel", lease: float = 900, horizon: float = 4 * 3600) -> Events:
    """A record as the old coordinator left it: begun, every branch prepared, the finance ask pending."""
    out: Events = [{"event": "txn.begin", "body": {"mode": mode}}]
    for b in PLAN.branches:
        about = {"txnId": PLAN.txn_id, "branchId": b.branch_id}
        held = {"leaseExpiresAt": at(lease), "holdHorizon": at(horizon)} if b.tier == "hold" else {}
        vote = {"type": "hatp.vote", **about, "decision": "yes"}
        receipt = {"type": "hatp.receipt", **about, "phase": "prepare", "outcome": "ok", "preconditions": {}, **held}
        out += [
            {"event": "vote", "body": {"branchId": b.branch_id}, "evidence": vote},
            {"event": "receipt", "body": {"branchId": b.branch_id}, "evidence": receipt},
        ]
    pending = {"type": "hatp.vote", "txnId": PLAN.txn_id, "branchId": "finance", "decision": "pending"}
    out.append({"event": "vote", "body": {"branchId": "finance"}, "evidence": {**pending, "decideBy": at(3600)}})
    return out


def started(
    events: Events, now: datetime, abort_request: dict[str, Any] | None = None
) -> tuple[Coordinator, list[Any]]:
    c = Coordinator.recover(PLAN, events, None, Keyring(), abort_request=abort_request)
    return c, c.handle(Start(), now)


def test_HATP_TXN_22_a_record_waiting_only_for_its_human_is_taken_up_again_in_approving() -> None:
    c, out = started(waiting(), NOW + timedelta(minutes=5))
    assert c.state is TxnState.APPROVING
    recovered = next(x for x in out if isinstance(x, Record) and x.event == "coordinator.recovered")
    assert recovered.body == {"decision": "resumed", "phase": "approving"}
    assert [x.requirement_id for x in out if isinstance(x, Poll)] == ["finance"]  # re-attached to the gateway's ask
    assert {x.key for x in out if isinstance(x, Arm)} >= {"renew:seat", "renew:room", "deadline"}
    assert not any(isinstance(x, Decide | SendAbort) for x in out)


def test_HATP_TXN_22_holds_first_is_taken_up_too() -> None:
    assert isinstance(approving_point(PLAN, waiting("holds-first")), Approving)


def _drop(name: str, branch: str) -> Callable[[Events], Events]:
    return lambda evs: [e for e in evs if not (e["event"] == name and e["body"].get("branchId") == branch)]


def _add(event: dict[str, Any]) -> Callable[[Events], Events]:
    return lambda evs: [*evs, event]


NOT_TAKEN_UP = {
    "approval-first: nothing is held": (
        lambda evs: [{"event": "txn.begin", "body": {"mode": "approval-first"}}, *evs[1:]],
        "mode approval-first",
    ),
    "a prepare still out": (_drop("receipt", "room"), "room is not prepared"),
    "a hold lost since": (_add({"event": "hold.lost", "body": {"branchId": "seat"}}), "seat is not prepared"),
    "no ask the gateway holds": (_drop("vote", "finance"), "approval finance has no open ask"),
    "a failed approval call": (
        _add({"event": "call.failed", "body": {"branchId": "finance", "phase": "approval"}}),
        "finance's approval call failed",
    ),
    "a refused vote": (_add({"event": "vote.refused", "body": {"branchId": "pay"}}), "the record holds vote.refused"),
}


@pytest.mark.parametrize("case", sorted(NOT_TAKEN_UP))
def test_HATP_TXN_22_anything_else_still_presumes_abort_and_says_why(case: str) -> None:
    change, why = NOT_TAKEN_UP[case]
    c, out = started(change(waiting()), NOW + timedelta(minutes=5))
    recovered = next(x for x in out if isinstance(x, Record) and x.event == "coordinator.recovered")
    assert recovered.body["decision"] == "presumed-abort" and why in recovered.body["notResumed"]
    assert next(x for x in out if isinstance(x, Decide)).reason.startswith("PRESUMED_ABORT")
    assert c.state is not TxnState.APPROVING


def test_HATP_TXN_22_the_agents_abort_request_is_never_taken_up() -> None:
    _c, out = started(waiting(), NOW + timedelta(minutes=5), {"reason": "off", "by": "agent://acme.com/travel-bot"})
    assert next(x for x in out if isinstance(x, Decide)).reason.startswith("ABORT_REQUESTED")


@pytest.mark.parametrize(
    ("lease", "horizon", "stopped", "code"),
    [
        (900, 4 * 3600, 901, "LEASE_EXPIRED"),  # the lease ended while no coordinator ran
        (5 * 3600, 3600, 3601, "HORIZON_PASSED"),  # the horizon passed, whatever the lease said
        (5 * 3600, 5 * 3600, 3601, "APPROVAL_TIMEOUT"),  # the requirement's decideBy passed
    ],
)
def test_HATP_TXN_23_a_bound_that_passed_while_stopped_aborts_with_its_own_code(
    lease: float, horizon: float, stopped: float, code: str
) -> None:
    c, out = started(waiting(lease=lease, horizon=horizon), NOW + timedelta(seconds=stopped))
    assert next(x for x in out if isinstance(x, Decide)).reason.startswith(code)
    assert not any(isinstance(x, Poll) for x in out)
    assert c.state is TxnState.ABORTING


@pytest.mark.parametrize(
    ("lease", "horizon", "stopped", "reason"),
    [
        (900, 4 * 3600, 901, "LEASE_EXPIRED: room's lease ended at 2026-11-29 10:15 UTC while no coordinator ran"),
        (5 * 3600, 3600, 3601, "HORIZON_PASSED: room's hold horizon ended at 2026-11-29 11:00 UTC"),
    ],
)
def test_HATP_GW_97_a_hold_that_lapsed_while_stopped_aborts_saying_when_in_words_without_a_countdown(
    lease: float, horizon: float, stopped: float, reason: str
) -> None:
    _c, out = started(waiting(lease=lease, horizon=horizon), NOW + timedelta(seconds=stopped))
    # the reason is kept in the Transaction Record: "(N min ago)" would be wrong when it is read later
    assert next(x for x in out if isinstance(x, Decide)).reason == reason

"""The pure participant rules: the branch table, leases, preconditions, cost, fencing-token locks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from demo.trip_world import trip_plan
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.participant.branch import (
    BranchEvent,
    BranchMachine,
    BranchState,
    LockTable,
    check_cost,
    check_preconditions,
    grant_lease,
    idempotency_key,
    renew_lease,
)
from hatp_mcp.errors import HatpError

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def test_an_illegal_branch_transition_is_refused_and_the_state_is_unchanged() -> None:
    m = BranchMachine().fire(BranchEvent.PREPARE_YES).fire(BranchEvent.COMMIT_INTENT).fire(BranchEvent.COMMIT)
    with pytest.raises(HatpError) as err:
        m.fire(BranchEvent.ABORT)  # committed: only compensate can undo it
    assert (err.value.rule, err.value.code) == ("HATP-PART-8", "ILLEGAL_TRANSITION")
    assert m.state is BranchState.COMMITTED


def test_HATP_PART_10_a_commit_passes_through_committing_and_only_an_intent_leads_there() -> None:
    prepared = BranchMachine().fire(BranchEvent.PREPARE_YES)
    with pytest.raises(HatpError) as err:
        prepared.fire(BranchEvent.COMMIT)  # no effect without its intent written first
    assert (err.value.rule, prepared.state) == ("HATP-PART-8", BranchState.PREPARED)
    committing = prepared.fire(BranchEvent.COMMIT_INTENT)
    assert committing.state is BranchState.COMMITTING
    assert committing.fire(BranchEvent.COMMIT).state is BranchState.COMMITTED
    assert committing.fire(BranchEvent.COMMIT_REFUSED).state is BranchState.PREPARED  # nothing happened
    with pytest.raises(HatpError):
        committing.fire(BranchEvent.ABORT)  # the effect may have happened: abort cannot take it back
    assert idempotency_key("txn-1", "pay") == "txn-1:pay"


def test_HATP_PART_12_a_compensation_passes_through_compensating() -> None:
    committed = BranchMachine(BranchState.COMMITTED)
    with pytest.raises(HatpError):
        committed.fire(BranchEvent.COMPENSATE)
    compensating = committed.fire(BranchEvent.COMPENSATE_INTENT)
    assert compensating.fire(BranchEvent.COMPENSATE).state is BranchState.COMPENSATED
    assert compensating.fire(BranchEvent.COMPENSATE_REFUSED).state is BranchState.COMMITTED


def test_a_lease_is_capped_by_the_participant_and_never_runs_past_the_horizon() -> None:
    seat = trip_plan(NOW).branch("seat")
    lease = grant_lease(seat, NOW, max_lease_seconds=300, max_horizon_seconds=600)
    assert lease.expires_at == NOW + timedelta(seconds=300) and lease.horizon == NOW + timedelta(seconds=600)
    renewed = renew_lease(lease, NOW + timedelta(seconds=250), asked_seconds=900, max_lease_seconds=900)
    assert renewed.expires_at == lease.horizon  # HATP-PART-4: never past the horizon


def test_renewing_a_lapsed_lease_is_refused_as_hold_lost() -> None:
    lease = grant_lease(trip_plan(NOW).branch("seat"), NOW, 300, 3600)
    with pytest.raises(HatpError) as err:
        renew_lease(lease, NOW + timedelta(seconds=300), 300, 300)
    assert (err.value.rule, err.value.code) == ("HATP-PART-4", "HOLD_LOST")


def test_a_changed_version_or_credential_scope_is_a_precondition_change() -> None:
    saw = Preconditions(versions={"seat:inventory": "1"}, credential_scope="book")
    check_preconditions(saw, {"seat:inventory": "1"}, "book")
    with pytest.raises(HatpError) as err:
        check_preconditions(saw, {"seat:inventory": "2"}, "book")
    assert (err.value.rule, err.value.code, err.value.path) == (
        "HATP-PART-5",
        "PRECONDITION_CHANGED",
        "$.preconditions.versions.seat:inventory",
    )
    with pytest.raises(HatpError) as err:
        check_preconditions(saw, {"seat:inventory": "1"}, "admin")
    assert err.value.path == "$.preconditions.credentialScope"


def test_a_plan_that_understates_the_cost_is_refused() -> None:
    plan = trip_plan(NOW)
    pay = plan.branch("pay")
    check_cost(pay, Amount.of("1020.00", "USD"), 3)  # within the 2% tolerance
    for reported in (Amount.of("1020.01", "USD"), Amount.of("900", "EUR")):
        with pytest.raises(HatpError) as err:
            check_cost(pay, reported, 3)
        assert (err.value.rule, err.value.code, err.value.path) == (
            "HATP-PART-3",
            "COST_UNDERSTATED",
            "$.branches[3].amount",
        )
    with pytest.raises(HatpError):
        check_cost(plan.branch("event"), Amount.of("5", "USD"), 2)  # no amount stated for something that costs


def test_a_live_lock_held_by_another_owner_cannot_be_acquired() -> None:
    locks = LockTable()
    locks.acquire("seat-14C", "txn-a", 60, NOW)
    with pytest.raises(HatpError) as err:
        locks.acquire("seat-14C", "txn-b", 60, NOW)
    assert (err.value.rule, err.value.code) == ("HATP-LOCK-1", "LOCKED")


def test_a_write_with_a_stale_fencing_token_is_refused() -> None:
    locks = LockTable()
    token, _ = locks.acquire("seat-14C", "txn-a", 60, NOW)
    locks.check("seat-14C", token, NOW)
    with pytest.raises(HatpError) as err:
        locks.check("seat-14C", token + 1, NOW)
    assert (err.value.rule, err.value.code) == ("HATP-LOCK-2", "STALE_TOKEN")
    locks.release("seat-14C", token, NOW)
    with pytest.raises(HatpError):
        locks.renew("seat-14C", token, 60, NOW)


def test_tokens_only_grow_and_an_expired_holder_becomes_stale() -> None:
    locks = LockTable()
    old, _ = locks.acquire("room-7", "txn-a", 60, NOW)
    later = NOW + timedelta(seconds=61)
    new, _ = locks.acquire("room-7", "txn-b", 60, later)  # HATP-LOCK-3
    assert new > old
    with pytest.raises(HatpError) as err:
        locks.check("room-7", old, later)
    assert err.value.rule == "HATP-LOCK-2"
    assert locks.holder("room-7", later) == ("txn-b", new, later + timedelta(seconds=60))

"""The pure coordinator state machine: the table, evidence checks, modes and recovery, without any runtime."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from demo.trip_world import AIRLINE, HOTEL, trip_plan
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SigningKey, sign_object
from hatp_mcp.core.txn import machine
from hatp_mcp.core.txn.data import Txn
from hatp_mcp.core.txn.events import (
    Decide,
    Finish,
    Outcome,
    PrepareAnswer,
    ReceiptAnswer,
    Record,
    SendAbort,
    SendCommit,
    SendPrepare,
    SendRenew,
    Start,
    Step,
    Timer,
    TxnState,
)
from hatp_mcp.core.txn.machine import ACCEPTS, TRANSITIONS, Coordinator, transition_table
from hatp_mcp.errors import HatpError

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[3]
KEYS = {
    "coordinator": SigningKey.generate(["coordinator"], kid="c"),
    "airline": SigningKey.generate(["participant"], kid="a"),
    "hotel": SigningKey.generate(["participant"], kid="h"),
    "gateway": SigningKey.generate(["gateway"], kid="g"),
}
PARTY = {"airline": AIRLINE, "hotel": HOTEL, "gateway": "gateway://acme.com"}  # HATP-SIG-6: each key names its party
RING = Keyring()
for _name, _k in KEYS.items():
    RING.add_signer(_k, PARTY.get(_name))


def answer(plan: Plan, branch: str, voter: str, key: SigningKey, cost: str = "600.00", **extra: Any) -> PrepareAnswer:
    base = {"txnId": plan.txn_id, "branchId": branch, "planDigest": plan.digest(), "issuedAt": format_ts(NOW)}
    vote = sign_object({"type": "hatp.vote", **base, "voter": voter, "decision": "yes"}, key)
    receipt = {
        "type": "hatp.receipt",
        **base,
        "participant": voter,
        "phase": "prepare",
        "outcome": "ok",
        "reportedCost": {"value": cost, "currency": "USD"},
        "leaseExpiresAt": format_ts(NOW + timedelta(seconds=900)),
        "holdHorizon": format_ts(NOW + timedelta(hours=4)),
        **extra,
    }
    return PrepareAnswer(branch_id=branch, vote=vote, receipt=sign_object(receipt, key))


def started() -> tuple[Coordinator, list[Any]]:
    c = Coordinator.begin(trip_plan(NOW), NOW, RING)
    return c, c.handle(Start(), NOW)


def test_the_spec_states_table_is_generated_from_the_transition_table() -> None:
    spec = (ROOT / "spec" / "coordinator.md").read_text()
    assert transition_table() in spec
    ends = {TxnState.COMMITTED, TxnState.ABORTED, TxnState.NEEDS_RECOVERY}
    assert set(ACCEPTS) | ends == set(TxnState)  # every state but the ends accepts events ...
    assert {state for state, _ in TRANSITIONS} | ends == set(TxnState)  # ... and has a step out of it
    assert set(TRANSITIONS.values()) | {TxnState.NEW} == set(TxnState)  # every state but new is reached
    assert {step for _, step in TRANSITIONS} == set(Step)  # and every step the phases name is in the table


_SETS_STATE = re.compile(r"\.state\s*=(?!=)")


def state_setters(sources: Mapping[str, str]) -> set[str]:
    """The modules with a line that sets a `.state`."""
    return {name for name, text in sources.items() for line in text.splitlines() if _SETS_STATE.search(line)}


def test_HATP_TXN_13_only_the_machine_and_its_data_class_set_a_state() -> None:
    sources = {p.name: p.read_text() for p in (ROOT / "hatp_mcp" / "core" / "txn").glob("*.py")}
    assert "phase2.py" in sources and state_setters(sources) <= {"machine.py", "data.py"}  # data: Txn.fire, restore
    planted = {**sources, "phase2.py": sources["phase2.py"] + "\n    t.state = TxnState.COMMITTING\n"}
    assert state_setters(planted) - {"machine.py", "data.py"} == {"phase2.py"}
    assert not state_setters({"phase1.py": "if t.state == T.QUOTING or t.state is T.PREPARING:"})


def test_HATP_TXN_13_a_step_the_table_does_not_have_is_refused_and_the_machine_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c, _ = started()
    forged = answer(c.plan, "seat", HOTEL, KEYS["hotel"])  # counts as no: the transaction decides abort
    before = c._d.snapshot()
    monkeypatch.delitem(machine.TRANSITIONS, (TxnState.PREPARING, Step.DECIDED_ABORT))  # planted: one pair gone
    with pytest.raises(HatpError) as err:
        c.handle(forged, NOW)
    assert (err.value.rule, err.value.code) == ("HATP-TXN-13", "ILLEGAL_TRANSITION")
    assert "'decided-abort' may not happen in state 'preparing'" in err.value.reason
    assert c._d.snapshot() == before  # the refused step changed nothing, nor did the work before it
    monkeypatch.undo()
    assert any(isinstance(x, Decide) and x.decision == "abort" for x in c.handle(forged, NOW))
    assert c.state is TxnState.ABORTING  # with the pair back, the same event takes the step


def test_an_event_the_state_does_not_accept_raises_and_leaves_the_machine_unchanged() -> None:
    c = Coordinator.begin(trip_plan(NOW), NOW, RING)
    with pytest.raises(HatpError) as err:
        c.handle(Timer(key="deadline", at=NOW), NOW)
    assert err.value.rule == "HATP-TXN-13" and err.value.code == "ILLEGAL_EVENT"
    assert c.state is TxnState.NEW


def test_an_error_while_handling_restores_the_state_and_data() -> None:
    c, _ = started()
    before = (c.state, dict(c._d.phase1.votes), set(c._d.phase1.inflight))
    bogus = answer(c.plan, "nope", AIRLINE, KEYS["airline"])
    with pytest.raises(HatpError) as err:
        c.handle(bogus, NOW)
    assert err.value.rule == "HATP-TXN-2"
    assert (c.state, dict(c._d.phase1.votes), set(c._d.phase1.inflight)) == before  # HATP-TXN-13: unchanged
    c.handle(answer(c.plan, "seat", AIRLINE, KEYS["airline"]), NOW)  # and it still works
    assert c._d.phase1.votes["seat"] == "yes"


def test_a_receipt_for_a_branch_the_plan_does_not_have_is_refused_and_changes_nothing_HATP_TXN_2() -> None:
    c, _ = started()
    before = c._d.snapshot()
    with pytest.raises(HatpError) as err:
        c.handle(ReceiptAnswer(branch_id="nope", receipt={"phase": "renew"}), NOW)
    assert (err.value.rule, err.value.code, err.value.reason) == (
        "HATP-TXN-2",
        "BAD_EVIDENCE",
        "no branch 'nope' in this plan",
    )
    assert c._d.snapshot() == before


def test_an_error_after_a_phase_changed_the_data_restores_every_group_and_the_timers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c, _ = started()
    c.handle(answer(c.plan, "seat", AIRLINE, KEYS["airline"]), NOW)
    before = c._d.snapshot()
    real = machine.on_prepared
    changed: list[bool] = []

    def work_then_fail(t: Txn, ev: PrepareAnswer, now: datetime) -> list[Any]:
        real(t, ev, now)  # the vote, the lease, the deadline and the renewal timer are written ...
        changed.append(t.snapshot() != before)
        raise RuntimeError("a bug after the work")  # ... and then something breaks

    monkeypatch.setattr(machine, "on_prepared", work_then_fail)
    with pytest.raises(RuntimeError):
        c.handle(answer(c.plan, "room", HOTEL, KEYS["hotel"], cost="400.00"), NOW)
    assert changed == [True]
    assert c._d.snapshot() == before  # state, phase-1 votes, holds, approvals, phase-2 progress and timers


def test_a_vote_signed_by_another_participant_is_refused_not_recorded_and_aborts() -> None:
    c, _ = started()
    forged = answer(c.plan, "seat", HOTEL, KEYS["hotel"])  # the hotel votes for the airline's branch
    out = c.handle(forged, NOW)
    refused = [x for x in out if isinstance(x, Record) and x.event == "evidence.refused"]
    assert refused and refused[0].body["rule"] == "HATP-TXN-2"
    assert refused[0].body["code"] == "KEY_NOT_THE_PARTICIPANTS"  # the hotel's key is bound to the hotel
    assert not any(isinstance(x, Record) and x.evidence is not None for x in out)
    assert any(isinstance(x, Decide) and x.decision == "abort" for x in out)
    assert c.state is TxnState.ABORTING
    assert ("abort", "seat") in c._d.phase2.abort_queue  # released like any other, in reverse commit order


def test_HATP_TXN_2_a_participant_key_bound_to_no_party_counts_for_no_branch() -> None:
    unbound = Keyring(PublicKeyEntry(e.kid, e.key, e.roles) for e in RING.entries())  # roles kept, parties dropped
    c = Coordinator.begin(trip_plan(NOW), NOW, unbound)
    c.handle(Start(), NOW)
    out = c.handle(answer(c.plan, "seat", AIRLINE, KEYS["airline"]), NOW)  # the airline's own key, its own vote
    refused = [x.body for x in out if isinstance(x, Record) and x.event == "evidence.refused"]
    assert [(b["rule"], b["code"]) for b in refused] == [("HATP-TXN-2", "KEY_NOT_THE_PARTICIPANTS")]
    assert "no party" in refused[0]["reason"] and c._d.phase1.votes["seat"] != "yes"
    assert c.state is TxnState.ABORTING  # fail closed: an unbound key is not taken on trust


def test_a_vote_signed_by_a_gateway_key_does_not_count_for_a_branch() -> None:
    c, _ = started()
    out = c.handle(answer(c.plan, "seat", AIRLINE, KEYS["gateway"]), NOW)
    assert [x.body["rule"] for x in out if isinstance(x, Record) and x.event == "evidence.refused"] == ["HATP-TXN-2"]
    assert c.state is TxnState.ABORTING


def test_a_yes_whose_receipt_reports_more_than_the_plan_allows_counts_as_no() -> None:
    c, _ = started()
    out = c.handle(answer(c.plan, "seat", AIRLINE, KEYS["airline"], cost="700.00"), NOW)
    assert any(isinstance(x, Record) and x.body.get("rule") == "HATP-TXN-14" for x in out)
    decide = next(x for x in out if isinstance(x, Decide))
    assert decide.decision == "abort" and decide.reason.startswith("VOTED_NO")


def test_an_explicit_mode_that_cannot_fit_is_refused_at_begin() -> None:
    plan = trip_plan(NOW, mode="parallel")
    short = plan.model_copy(
        update={
            "branches": [
                b.model_copy(update={"hold_horizon_seconds": 1200}) if b.tier == "hold" else b for b in plan.branches
            ]
        }
    )
    with pytest.raises(HatpError) as err:
        Coordinator.begin(short, NOW, RING)  # no validator: the coordinator's own check refuses it
    assert err.value.rule == "HATP-MODE-2" and err.value.path == "$.mode"


def test_a_replacement_without_a_logged_decision_presumes_abort() -> None:
    c, _ = started()
    seat = c.handle(answer(c.plan, "seat", AIRLINE, KEYS["airline"]), NOW)
    logged = [{"event": "txn.begin", "body": {"mode": "parallel"}}] + [
        {"event": r.event, "body": r.body, "evidence": r.evidence} for r in seat if isinstance(r, Record)
    ]
    r = Coordinator.recover(c.plan, logged, None, RING)
    out = r.handle(Start(), NOW)
    assert next(x for x in out if isinstance(x, Decide)).reason.startswith("PRESUMED_ABORT")  # HATP-TXN-12
    assert [x.branch_id for x in out if isinstance(x, SendAbort)] == ["room"]  # one at a time, reverse order
    assert not any(isinstance(x, SendCommit | SendPrepare) for x in out)


def test_a_replacement_with_a_logged_commit_finishes_phase_two_skipping_what_committed() -> None:
    plan = trip_plan(NOW)
    base = {"txnId": plan.txn_id, "planDigest": plan.digest(), "issuedAt": format_ts(NOW)}
    committed = {
        "type": "hatp.receipt",
        **base,
        "branchId": "event",
        "participant": "mcp://calendar.example/hatp",
        "phase": "commit",
        "outcome": "ok",
        "undoToken": "evt-1",
    }
    logged = [
        {"event": "txn.begin", "body": {"mode": "parallel"}},
        {"event": "decision", "body": {"decision": "commit"}},
        {"event": "commit", "body": {"branchId": "event"}, "evidence": committed},
    ]
    r = Coordinator.recover(plan, logged, "commit", RING)
    out = r.handle(Start(), NOW)
    assert not any(isinstance(x, Decide) for x in out)
    # HATP-TXN-12: the calendar is not committed again; the holds' leases are unknown, so they are renewed first
    assert [x.branch_id for x in out if isinstance(x, SendRenew)] == ["seat", "room"]
    assert not any(isinstance(x, SendCommit) for x in out)
    assert r.state is TxnState.COMMITTING


def test_a_quote_receipt_does_not_answer_a_prepare() -> None:
    c, _ = started()
    out = c.handle(answer(c.plan, "seat", AIRLINE, KEYS["airline"], phase="quote"), NOW)
    refused = [x.body for x in out if isinstance(x, Record) and x.event == "evidence.refused"]
    assert refused and refused[0]["rule"] == "HATP-TXN-2" and "quote" in refused[0]["reason"]
    assert c.state is TxnState.ABORTING


def test_HATP_TXN_16_a_pending_vote_without_its_signed_deadline_is_refused_and_aborts() -> None:
    c, _ = started()
    base = {"txnId": c.plan.txn_id, "branchId": "seat", "planDigest": c.plan.digest(), "issuedAt": format_ts(NOW)}
    vote = sign_object({"type": "hatp.vote", **base, "voter": AIRLINE, "decision": "pending"}, KEYS["airline"])
    receipt = {"type": "hatp.receipt", **base, "participant": AIRLINE, "phase": "prepare", "outcome": "in-doubt"}
    out = c.handle(PrepareAnswer(branch_id="seat", vote=vote, receipt=sign_object(receipt, KEYS["airline"])), NOW)
    refused = [x for x in out if isinstance(x, Record) and x.event == "vote.refused"]
    assert [r.body for r in refused] == [{"branchId": "seat", "rule": "HATP-TXN-16", "code": "NO_DEADLINE"}]
    assert any(isinstance(x, Decide) and x.decision == "abort" for x in out)  # never waited on without a bound
    assert c.state is TxnState.ABORTING


def test_a_quote_that_cannot_be_counted_aborts_while_quoting() -> None:
    c = Coordinator.begin(trip_plan(NOW, mode="approval-first"), NOW, RING)
    c.handle(Start(), NOW)
    quoting = c.state
    out = c.handle(answer(c.plan, "seat", HOTEL, KEYS["hotel"], phase="quote"), NOW)  # the hotel's key
    assert any(isinstance(x, Decide) and x.decision == "abort" for x in out)
    assert (quoting, c.state) == (TxnState.QUOTING, TxnState.ABORTING)


def test_an_abort_whose_undo_is_refused_ends_in_needs_recovery() -> None:
    plan = trip_plan(NOW)
    holds = plan.model_copy(update={"branches": [b for b in plan.branches if b.tier == "hold"]})
    c = Coordinator.begin(holds, NOW, RING)
    c.handle(Start(), NOW)
    out = c.handle(answer(holds, "seat", HOTEL, KEYS["hotel"]), NOW)  # cannot be counted: abort
    assert [x.branch_id for x in out if isinstance(x, SendAbort)] == ["room"]
    base = {"txnId": holds.txn_id, "planDigest": holds.digest(), "issuedAt": format_ts(NOW), "phase": "abort"}

    def released(branch: str, participant: str, key: SigningKey, outcome: str) -> ReceiptAnswer:
        receipt = {"type": "hatp.receipt", **base, "branchId": branch, "participant": participant, "outcome": outcome}
        return ReceiptAnswer(branch_id=branch, receipt=sign_object(receipt, key))

    out = c.handle(released("room", HOTEL, KEYS["hotel"], "refused"), NOW)
    assert [x.branch_id for x in out if isinstance(x, SendAbort)] == ["seat"]
    out = c.handle(released("seat", AIRLINE, KEYS["airline"], "ok"), NOW)
    assert [x.outcome for x in out if isinstance(x, Finish)] == [Outcome.NEEDS_RECOVERY]
    assert c.state is TxnState.NEEDS_RECOVERY and c._d.phase2.undo_failed == ["room"]


def test_HATP_GW_97_a_branch_pending_past_its_decideBy_aborts_saying_the_time_without_a_countdown() -> None:
    c, _ = started()
    base = {"txnId": c.plan.txn_id, "branchId": "seat", "planDigest": c.plan.digest(), "issuedAt": format_ts(NOW)}
    late = format_ts(NOW - timedelta(minutes=5))
    vote = sign_object(
        {"type": "hatp.vote", **base, "voter": AIRLINE, "decision": "pending", "decideBy": late}, KEYS["airline"]
    )
    receipt = {"type": "hatp.receipt", **base, "participant": AIRLINE, "phase": "prepare", "outcome": "in-doubt"}
    out = c.handle(PrepareAnswer(branch_id="seat", vote=vote, receipt=sign_object(receipt, KEYS["airline"])), NOW)
    timeout = [x.body for x in out if isinstance(x, Record) and x.event == "vote.timeout"]
    assert timeout == [{"branchId": "seat", "decideBy": late}]  # the structured field as the wire has it
    # the reason the record keeps: "(N min ago)" would be wrong when it is read later
    assert next(x for x in out if isinstance(x, Decide)).reason == (
        "VOTE_TIMEOUT: seat did not decide by 2026-11-29 09:55 UTC"
    )

"""The journal's pure step machine: the tables, forward steps, LIFO rollback, pivots, in-doubt steps, retries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.core.journal.events import (
    ArmRetry,
    CallStep,
    CallUndo,
    Command,
    Complete,
    DeadLetter,
    Finished,
    Lookup,
    LookupAnswered,
    Recovered,
    RetryDue,
    Rollback,
    SagaStatus,
    StartStep,
    StepCompleted,
    StepFailed,
    StepState,
    UndoAnswered,
    Write,
)
from hatp_mcp.core.journal.machine import (
    SAGA_TRANSITIONS,
    STEP_TRANSITIONS,
    RetryPolicy,
    SagaMachine,
    read_output,
    step_key,
    transition_tables,
    undo_key,
)
from hatp_mcp.errors import HatpError

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
S, P = SagaStatus, StepState


def writes(cmds: list[Command]) -> list[str]:
    return [c.event for c in cmds if isinstance(c, Write)]


def entries(m: SagaMachine, log: list[Command]) -> list[tuple[str, dict[str, Any]]]:
    return [(c.event, c.body) for c in log if isinstance(c, Write)]


class Run:
    """A machine plus every command it returned, in order (what a driver would have written)."""

    def __init__(self, retry: RetryPolicy | None = None) -> None:
        self.m, self.log = SagaMachine.begin("saga-1", "return-882", retry)

    def feed(self, event: Any, now: datetime = NOW) -> list[Command]:
        out = self.m.handle(event, now)
        self.log += out
        return out

    def step(self, step_id: str, *, undo: bool = True, pivot: bool = False, ok: bool = True) -> None:
        self.feed(StartStep(step_id=step_id, tool=f"tool-{step_id}", args={"n": step_id}, has_undo=undo, pivot=pivot))
        if ok:
            self.feed(StepCompleted(step_id=step_id, output={"id": f"out-{step_id}"}))
        else:
            self.feed(StepFailed(step_id=step_id, error="label service down"))

    def replayed(self) -> SagaMachine:
        return SagaMachine.replay("saga-1", entries(self.m, self.log))


def test_the_spec_state_tables_are_generated_from_the_machine() -> None:
    spec = (ROOT / "spec" / "journal.md").read_text()
    assert transition_tables() in spec
    assert set(SAGA_TRANSITIONS) | {S.COMPLETED, S.ROLLED_BACK, S.ROLLBACK_FAILED} == set(SagaStatus)
    reachable = {t for row in STEP_TRANSITIONS.values() for t in row.values()}
    assert reachable == set(StepState)


def test_a_step_is_written_before_its_call_goes_out_and_its_result_after_HATP_JRN_2() -> None:
    r = Run()
    out = r.feed(StartStep(step_id="s1", tool="mark_returned", args={"item": "882"}, has_undo=True))
    assert [type(c) for c in out] == [Write, CallStep]
    started = out[0]
    assert isinstance(started, Write) and started.event == "step.started"
    assert started.body["key"] == step_key("saga-1", "s1", 1) == "saga-1:s1:1"  # HATP-JRN-7
    assert isinstance(out[1], CallStep) and out[1].key == "saga-1:s1:1"
    assert r.m.step("s1").state is P.PENDING
    assert writes(r.feed(StepCompleted(step_id="s1", output={"ok": True}))) == ["step.completed"]
    assert r.m.step("s1").state is P.COMPLETED and r.m.step("s1").output == {"ok": True}
    done = r.feed(Complete())
    assert writes(done) == ["saga.closed"] and done[-1] == Finished(status=S.COMPLETED)
    assert r.m.status is S.COMPLETED and r.replayed().status is S.COMPLETED


def test_an_event_the_status_does_not_accept_raises_and_leaves_the_saga_unchanged_HATP_JRN_1() -> None:
    r = Run()
    r.step("s1")
    r.feed(Complete())
    with pytest.raises(HatpError) as err:
        r.m.handle(Rollback(reason="late"), NOW)
    assert err.value.rule == "HATP-JRN-1" and err.value.code == "ILLEGAL_EVENT"
    assert r.m.status is S.COMPLETED and r.m.step("s1").state is P.COMPLETED


def test_an_entry_the_step_state_does_not_allow_raises_and_leaves_the_step_unchanged_HATP_JRN_1() -> None:
    r = Run()
    r.step("s1", ok=False)
    before = r.m.steps
    with pytest.raises(HatpError) as err:
        r.m.handle(StepCompleted(step_id="s1", output={}), NOW)  # a failed step does not complete later
    assert err.value.rule == "HATP-JRN-1" and err.value.code == "ILLEGAL_ENTRY"
    assert r.m.steps == before
    with pytest.raises(HatpError) as dup:
        r.m.handle(StartStep(step_id="s1", tool="t", args={}, has_undo=False), NOW)
    assert dup.value.code == "DUPLICATE_STEP" and r.m.steps == before


def test_rollback_undoes_completed_steps_last_first_one_at_a_time_HATP_JRN_3() -> None:
    r = Run()
    for s in ("s1", "s2", "s3"):
        r.step(s)
    out = r.feed(Rollback(reason="label failed"))
    assert r.m.status is S.FAILED
    assert writes(out) == ["saga.rollback", "undo.started"]
    call = out[-1]
    assert isinstance(call, CallUndo) and call.step_id == "s3" and call.output == {"id": "out-s3"}
    assert call.key == undo_key("saga-1", "s3", 1) == "saga-1:s3:1:undo"
    order = [call.step_id]
    while not r.m.done:
        nxt = r.feed(UndoAnswered(step_id=order[-1], ok=True, output={"undone": order[-1]}))
        calls = [c for c in nxt if isinstance(c, CallUndo)]
        order += [c.step_id for c in calls]
    assert order == ["s3", "s2", "s1"]
    assert r.m.status is S.ROLLED_BACK
    assert [s.state for s in r.m.steps] == [P.ROLLED_BACK] * 3
    assert r.replayed().status is S.ROLLED_BACK


def test_a_step_without_an_undo_is_skipped_and_recorded_and_a_failed_step_is_left_alone_HATP_JRN_4() -> None:
    r = Run()
    r.step("s1")
    r.step("notify", undo=False)
    r.step("s3", ok=False)
    out = r.feed(Rollback(reason="s3 failed"))
    assert writes(out) == ["saga.rollback", "step.skipped", "undo.started"]
    skipped = next(c for c in out if isinstance(c, Write) and c.event == "step.skipped")
    assert skipped.body == {"stepId": "notify", "reason": "no-undo"}
    out = r.feed(UndoAnswered(step_id="s1", ok=True))
    assert out[-1] == Finished(status=S.ROLLED_BACK)
    views = {s.step_id: s for s in r.m.steps}
    assert views["notify"].rollback == "skipped-no-undo" and views["notify"].state is P.COMPLETED
    assert views["s3"].state is P.FAILED and views["s1"].rollback == "undone"


def test_a_failed_undo_does_not_stop_the_rollback_and_the_saga_ends_rollback_failed_HATP_JRN_4() -> None:
    r = Run(RetryPolicy(max_attempts=1))
    r.step("s1")
    r.step("s2")
    r.feed(Rollback(reason="boom"))
    out = r.feed(UndoAnswered(step_id="s2", ok=False, error="refund API 500"))
    assert writes(out) == ["undo.gave-up", "undo.started"]
    dead = next(c for c in out if isinstance(c, DeadLetter))
    assert dead.entry["stepId"] == "s2" and dead.entry["error"] == "refund API 500"
    assert dead.entry["input"] == {"n": "s2"} and dead.entry["output"] == {"id": "out-s2"}
    assert dead.entry["attempts"] == 1 and dead.entry["phase"] == "undo"
    undo_s1 = out[-1]
    assert isinstance(undo_s1, CallUndo) and undo_s1.step_id == "s1"  # the rest still gets undone
    out = r.feed(UndoAnswered(step_id="s1", ok=True))
    assert out[-1] == Finished(status=S.ROLLBACK_FAILED)
    assert r.m.step("s2").state is P.ROLLBACK_FAILED and r.m.step("s1").state is P.ROLLED_BACK


def test_rollback_stops_at_a_completed_pivot_and_the_record_says_so_HATP_JRN_5() -> None:
    r = Run()
    r.step("s1")
    r.step("ship", undo=False, pivot=True)
    r.step("s3")
    r.feed(Rollback(reason="boom"))
    out = r.feed(UndoAnswered(step_id="s3", ok=True))
    assert writes(out) == ["undo.done", "rollback.stopped", "saga.closed"]
    stopped = next(c for c in out if isinstance(c, Write) and c.event == "rollback.stopped")
    closed = next(c for c in out if isinstance(c, Write) and c.event == "saga.closed")
    assert stopped.body == {"stepId": "ship", "reason": "pivot"}
    assert closed.body == {"status": "ROLLED_BACK", "stoppedAt": "ship"}
    assert r.m.step("s1").state is P.COMPLETED and r.m.step("s1").rollback is None  # before the pivot: kept
    assert r.m.step("ship").rollback == "kept-pivot" and r.m.stopped_at == "ship"
    assert r.replayed().stopped_at == "ship"


def test_rollback_leaves_an_irreversible_step_in_place_goes_on_and_never_ends_rolled_back_HATP_JRN_19() -> None:
    r = Run()
    r.step("s1")
    r.feed(StartStep(step_id="write", tool="write_file", args={"path": "a"}, has_undo=False, irreversible=True))
    r.feed(StepCompleted(step_id="write", output={"ok": True}))
    r.step("s3")
    r.feed(Rollback(reason="boom"))
    r.feed(UndoAnswered(step_id="s3", ok=True))
    out = r.feed(UndoAnswered(step_id="s1", ok=True))  # rollback went on past the irreversible step
    closed = next(c for c in out if isinstance(c, Write) and c.event == "saga.closed")
    assert closed.body == {"status": "ROLLBACK_FAILED", "leftInPlace": ["write"]}
    assert out[-1] == Finished(status=S.ROLLBACK_FAILED) and not any(isinstance(c, DeadLetter) for c in out)
    skipped = next(b for e, b in entries(r.m, r.log) if e == "step.skipped")
    assert skipped == {"stepId": "write", "reason": "irreversible"}
    assert r.m.step("write").rollback == "kept-irreversible" and r.m.step("s1").rollback == "undone"
    assert r.replayed().status is S.ROLLBACK_FAILED
    # a record that says it was all undone, over an irreversible step left in place, does not replay
    lie = [*entries(r.m, r.log)[:-1], ("saga.closed", {"status": "ROLLED_BACK"})]
    with pytest.raises(HatpError) as err:
        SagaMachine.replay("saga-1", lie)
    assert err.value.rule == "HATP-JRN-19" and err.value.code == "IRREVERSIBLE_KEPT"
    # nor does one whose skip calls it a mere no-undo step: the step as started decides
    relabelled = [(e, {**b, "reason": "no-undo"} if e == "step.skipped" else b) for e, b in lie]
    with pytest.raises(HatpError):
        SagaMachine.replay("saga-1", relabelled)


def test_a_pivot_in_doubt_stops_rollback_and_the_saga_ends_rollback_failed_HATP_JRN_5() -> None:
    r = Run()
    r.step("s1")
    r.feed(StartStep(step_id="ship", tool="ship", args={}, has_undo=False, pivot=True))
    out = r.feed(Rollback(reason="cancelled"))
    assert writes(out) == ["saga.rollback", "step.in-doubt"] and isinstance(out[-1], Lookup)
    out = r.feed(LookupAnswered(step_id="ship", happened=None))
    assert writes(out) == ["step.dead-letter", "rollback.stopped", "saga.closed"]
    assert out[-1] == Finished(status=S.ROLLBACK_FAILED)
    assert r.m.step("s1").state is P.COMPLETED  # it may stand: the pivot may have happened


def test_a_pending_step_at_rollback_is_in_doubt_and_only_its_lookup_resolves_it_HATP_JRN_6() -> None:
    r = Run()
    r.step("s1")
    r.feed(StartStep(step_id="s2", tool="refund", args={"usd": "40.00"}, has_undo=True))
    out = r.feed(Rollback(reason="cancelled"))
    lookup = out[-1]
    assert isinstance(lookup, Lookup) and lookup.step_id == "s2" and lookup.key == "saga-1:s2:1"
    out = r.feed(LookupAnswered(step_id="s2", happened=True, output={"refund": "r-9"}))
    assert writes(out) == ["lookup.happened", "undo.started"]
    undo = out[-1]
    assert isinstance(undo, CallUndo) and undo.output == {"refund": "r-9"}  # undone with what the lookup found


def test_an_absent_lookup_means_nothing_to_undo_and_an_unknown_one_is_a_dead_letter_HATP_JRN_6() -> None:
    r = Run()
    r.feed(StartStep(step_id="s1", tool="mark", args={}, has_undo=True))
    r.feed(StartStep(step_id="s2", tool="refund", args={}, has_undo=True))
    r.feed(Rollback(reason="cancelled"))
    out = r.feed(LookupAnswered(step_id="s2", happened=False))
    assert writes(out) == ["lookup.absent", "step.in-doubt"] and isinstance(out[-1], Lookup)
    out = r.feed(LookupAnswered(step_id="s1", happened=None, error="no lookup declared"))
    assert writes(out) == ["step.dead-letter", "saga.closed"]
    assert any(isinstance(c, DeadLetter) and c.entry["phase"] == "execute" for c in out)
    assert out[-1] == Finished(status=S.ROLLBACK_FAILED)  # a dead letter is never ROLLED_BACK


def test_an_in_doubt_step_is_never_guessed_HATP_JRN_6() -> None:
    r = Run()
    r.feed(StartStep(step_id="s1", tool="refund", args={}, has_undo=True))
    r.feed(Recovered(policy="resume"))
    assert r.m.step("s1").state is P.IN_DOUBT and r.m.status is S.IN_PROGRESS
    for guess in (StepFailed(step_id="s1", error="probably not"), StepCompleted(step_id="s1", output={})):
        with pytest.raises(HatpError) as err:
            r.m.handle(guess, NOW)
        assert err.value.rule == "HATP-JRN-6" and err.value.code == "IN_DOUBT_GUESSED"
        assert r.m.step("s1").state is P.IN_DOUBT
    with pytest.raises(HatpError) as err:
        r.m.handle(Complete(), NOW)
    assert err.value.rule == "HATP-JRN-6" and err.value.code == "STEPS_OPEN" and r.m.status is S.IN_PROGRESS
    assert r.feed(LookupAnswered(step_id="s1", happened=None)) == []  # resume: unknown stays in doubt
    r.feed(LookupAnswered(step_id="s1", happened=True, output={"r": 1}))
    assert r.m.step("s1").state is P.COMPLETED


def test_a_failed_undo_is_retried_with_backoff_on_absolute_deadlines_then_gives_up_HATP_JRN_8() -> None:
    r = Run(RetryPolicy(max_attempts=3, base_ms=1000, factor=2, cap_ms=60_000))
    r.step("s1")
    r.feed(Rollback(reason="boom"))
    now = NOW
    waits = []
    for attempt in (1, 2):
        out = r.feed(UndoAnswered(step_id="s1", ok=False, error="503"), now)
        arm = out[-1]
        assert isinstance(arm, ArmRetry)
        due = datetime.fromisoformat(arm.at.replace("Z", "+00:00"))
        waits.append((due - now).total_seconds())
        with pytest.raises(HatpError) as early:
            r.m.handle(RetryDue(step_id="s1"), due - timedelta(milliseconds=1))
        assert early.value.rule == "HATP-JRN-8" and early.value.code == "NOT_DUE"
        out = r.feed(RetryDue(step_id="s1"), due)
        call = out[-1]
        assert isinstance(call, CallUndo) and call.attempt == attempt + 1
        assert call.key == "saga-1:s1:1:undo"  # HATP-JRN-7: every retry, the same key
        now = due
    assert waits == [1.0, 2.0]
    out = r.feed(UndoAnswered(step_id="s1", ok=False, error="503"), now)
    assert writes(out) == ["undo.gave-up", "saga.closed"]
    dead = next(c for c in out if isinstance(c, DeadLetter))
    assert dead.entry["attempts"] == 3 and r.m.status is S.ROLLBACK_FAILED


def test_an_undo_that_cannot_be_retried_gives_up_at_once_HATP_JRN_8() -> None:
    r = Run()
    r.step("s1")
    r.feed(Rollback(reason="boom"))
    out = r.feed(UndoAnswered(step_id="s1", ok=False, error="unknown tool", retryable=False))
    assert writes(out) == ["undo.gave-up", "saga.closed"] and r.m.status is S.ROLLBACK_FAILED


def test_an_undo_runs_at_most_once_per_step_HATP_JRN_9() -> None:
    r = Run()
    r.step("s1")
    r.step("s2")
    r.feed(Rollback(reason="boom"))
    r.feed(UndoAnswered(step_id="s2", ok=True))
    before = r.m.steps
    with pytest.raises(HatpError) as again:
        r.m.handle(UndoAnswered(step_id="s2", ok=True), NOW)  # s2 is rolled back: no undo of it is out
    assert again.value.rule == "HATP-JRN-9" and again.value.code == "UNDO_NOT_OUT"
    assert r.m.steps == before
    # a journal that starts a second undo of s1 while the first is out does not replay
    forged = [*entries(r.m, r.log), ("undo.started", {"stepId": "s1", "attempt": 2, "key": "saga-1:s1:1:undo"})]
    with pytest.raises(HatpError) as twice:
        SagaMachine.replay("saga-1", forged)
    assert twice.value.rule == "HATP-JRN-9" and twice.value.code == "UNDO_TWICE"
    rolled = [*entries(r.m, r.log)[:-2], ("undo.started", {"stepId": "s2", "attempt": 2})]
    with pytest.raises(HatpError) as after:
        SagaMachine.replay("saga-1", rolled)  # an undo of a step already rolled back
    assert after.value.rule == "HATP-JRN-9"


def test_a_close_that_hides_a_completed_step_does_not_replay_HATP_JRN_3() -> None:
    r = Run()
    r.step("s1")
    r.step("s2")
    r.feed(Rollback(reason="boom"))
    r.feed(UndoAnswered(step_id="s2", ok=True))
    skipped = [*entries(r.m, r.log)[:-1], ("saga.closed", {"status": "ROLLED_BACK"})]  # s1's undo never ran
    with pytest.raises(HatpError) as err:
        SagaMachine.replay("saga-1", skipped)
    assert err.value.rule == "HATP-JRN-3" and err.value.code == "STEP_NOT_UNDONE"


def test_a_close_claiming_rolled_back_over_a_failed_undo_does_not_replay_HATP_JRN_4() -> None:
    r = Run(RetryPolicy(max_attempts=1))
    r.step("s1")
    r.feed(Rollback(reason="boom"))
    r.feed(UndoAnswered(step_id="s1", ok=False, error="500"))
    lie = [*entries(r.m, r.log)[:-1], ("saga.closed", {"status": "ROLLED_BACK"})]
    with pytest.raises(HatpError) as err:
        SagaMachine.replay("saga-1", lie)
    assert err.value.rule == "HATP-JRN-4" and err.value.code == "ROLLBACK_NOT_CLEAN"


def test_recovery_rolls_back_by_default_with_pending_steps_in_doubt_HATP_JRN_10() -> None:
    r = Run()
    r.step("s1")
    r.feed(StartStep(step_id="s2", tool="refund", args={}, has_undo=True))
    m = r.replayed()
    out = m.handle(Recovered(), NOW)
    assert writes(out) == ["saga.recovered", "step.in-doubt", "saga.rollback"]
    assert isinstance(out[-1], Lookup) and out[-1].step_id == "s2" and m.status is S.FAILED


def test_recovery_mid_rollback_sends_the_lost_undo_again_with_its_key_HATP_JRN_10() -> None:
    r = Run()
    r.step("s1")
    r.feed(Rollback(reason="boom"))  # undo of s1 is out when the process dies
    m = r.replayed()
    out = m.handle(Recovered(), NOW)
    assert writes(out) == ["saga.recovered", "undo.started"]
    call = out[-1]
    assert isinstance(call, CallUndo) and call.key == "saga-1:s1:1:undo" and call.attempt == 2


def test_recovery_keeps_an_armed_retry_at_its_time_HATP_JRN_10() -> None:
    r = Run()
    r.step("s1")
    r.feed(Rollback(reason="boom"))
    armed = r.feed(UndoAnswered(step_id="s1", ok=False, error="503"))[-1]
    assert isinstance(armed, ArmRetry)
    m = r.replayed()
    out = m.handle(Recovered(), NOW + timedelta(hours=1))
    assert writes(out) == ["saga.recovered"] and out[-1] == ArmRetry(step_id="s1", at=armed.at)


def test_arguments_must_be_canonical_json_and_outputs_are_never_dropped_HATP_JRN_11() -> None:
    r = Run()
    with pytest.raises(HatpError) as err:
        r.m.handle(StartStep(step_id="s1", tool="refund", args={"usd": 40.5}, has_undo=True), NOW)
    assert err.value.rule == "HATP-CANON-2" and r.m.steps == []
    for not_an_object in (["usd", "40.50"], "usd=40.50", None):
        with pytest.raises(HatpError) as err:
            r.m.handle(StartStep(step_id="s1", tool="refund", args=not_an_object, has_undo=True), NOW)  # type: ignore[arg-type]
        assert (err.value.rule, err.value.code, err.value.path) == ("HATP-JRN-11", "BAD_ARGUMENTS", "args")
        assert r.m.steps == []
    r.feed(StartStep(step_id="s1", tool="refund", args={"usd": "40.50"}, has_undo=True))
    out = r.feed(StepCompleted(step_id="s1", output={"usd": 40.5}))
    body = next(c for c in out if isinstance(c, Write)).body
    assert body == {"stepId": "s1", "outputText": '{"usd": 40.5}'} and read_output(body) == {"usd": 40.5}
    assert r.m.step("s1").output == {"usd": 40.5}
    r.feed(StartStep(step_id="s2", tool="t", args={}, has_undo=False))
    body = next(c for c in r.feed(StepCompleted(step_id="s2", output=object())) if isinstance(c, Write)).body
    assert body["output"] is None and "not JSON" in body["outputError"]


def test_a_retry_policy_without_bounds_is_refused() -> None:
    with pytest.raises(ValueError, match="not bounded"):
        RetryPolicy(max_attempts=0)


def test_an_error_while_handling_restores_every_step_the_event_had_changed_HATP_JRN_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    r = Run()
    r.step("s1")
    r.step("notify", undo=False)
    before_steps, before_status = r.m.steps, r.m.status

    def boom(self: SagaMachine, s: Any) -> list[Command]:
        raise RuntimeError("the driver's bug")

    monkeypatch.setattr(SagaMachine, "_send_undo", boom)
    with pytest.raises(RuntimeError, match="driver's bug"):
        r.m.handle(Rollback(reason="boom"), NOW)  # saga.rollback and step.skipped were applied, then it failed
    assert r.m.status is before_status is S.IN_PROGRESS and r.m.steps == before_steps
    assert r.m.step("notify").rollback is None
    monkeypatch.undo()
    out = r.feed(Rollback(reason="boom"))  # and it still works as if nothing had happened
    assert writes(out) == ["saga.rollback", "step.skipped", "undo.started"]

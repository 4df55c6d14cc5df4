"""Carrying out an abort in the pure coordinator machine (core/txn/abort.py): an undo whose receipt is in doubt, or
that gets no answer, is sent again within its bound, and what stays in doubt is offered for recovery, never said to
be undone (HATP-TXN-30, HATP-TXN-31)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.core.txn.data import Config
from hatp_mcp.core.txn.events import (
    Arm,
    CallFailed,
    Command,
    Finish,
    Outcome,
    ReceiptAnswer,
    Record,
    SendAbort,
    SendCommit,
    SendCompensate,
    Start,
    Timer,
    TxnState,
)
from hatp_mcp.core.txn.machine import Coordinator
from hatp_mcp.errors import HatpError
from tests.core.txn.test_phase2 import KEYS, NOW, RING, WHO, receipt, trip_plan

# How a scripted participant answers the n-th undo of a branch (1-based): "ok", "in-doubt", "refused" or "silent"
# (the call fails: no answer).
Script = Callable[[str, int], str]
LEASE = {
    "leaseExpiresAt": format_ts(NOW + timedelta(seconds=900)),
    "holdHorizon": format_ts(NOW + timedelta(hours=4)),
}


def logged_commit(plan: Plan) -> list[dict[str, Any]]:
    """The log of a commit decided on placed holds, after which the calendar event (compensate tier) committed."""
    return [
        {"event": "txn.begin", "body": {"mode": "parallel"}},
        *(
            {"event": "receipt", "body": {"branchId": h}, "evidence": receipt(plan, h, "prepare", **LEASE)}
            for h in ("seat", "room")
        ),
        {"event": "decision", "body": {"decision": "commit"}},
        {"event": "commit", "body": {"branchId": "event"}, "evidence": receipt(plan, "event", "commit", undoToken="e")},
    ]


def compensating(config: Config | None = None) -> tuple[Coordinator, list[Command]]:
    """A replacement whose log says commit was decided and the calendar event (compensate tier) committed; the
    payment then refuses its commit, so the machine aborts and has the event compensated (HATP-TXN-6)."""
    plan = trip_plan(NOW)
    c = Coordinator.recover(plan, logged_commit(plan), "commit", RING, config)
    out = c.handle(Start(), NOW)
    assert [x.branch_id for x in out if isinstance(x, SendCommit)] == ["pay"]
    refused = receipt(plan, "pay", "commit", "refused", code="CARD_DECLINED")
    return c, c.handle(ReceiptAnswer(branch_id="pay", receipt=refused), NOW)


def run_abort(c: Coordinator, out: list[Command], script: Script, limit: int = 100) -> tuple[list[Command], datetime]:
    """Answer every undo the machine sends as `script` says and fire every timer it arms, until it finishes:
    every command it gave, and the clock at the end. Bounded by `limit` events."""
    seen: list[Command] = list(out)
    sends: dict[str, int] = {}
    now = NOW
    pending = list(out)
    for _ in range(limit):
        if c.done:
            return seen, now
        send = next((x for x in pending if isinstance(x, SendAbort | SendCompensate)), None)
        armed = [x for x in pending if isinstance(x, Arm) and x.key == "undo"]
        if send is not None:
            bid = send.branch_id
            phase = "compensate" if isinstance(send, SendCompensate) else "abort"
            sends[bid] = sends.get(bid, 0) + 1
            answer = script(bid, sends[bid])
            if answer == "silent":
                pending = c.handle(CallFailed(branch_id=bid, phase=phase, reason="no answer"), now)
            else:
                code = {"in-doubt": "UPSTREAM_NO_ANSWER", "refused": "UNDO_REFUSED"}.get(answer)
                extra: dict[str, Any] = {"code": code} if code else {}
                signed = receipt(c.plan, bid, phase, answer, **extra)
                pending = c.handle(ReceiptAnswer(branch_id=bid, receipt=signed), now)
        elif armed:
            now = armed[-1].at
            pending = c.handle(Timer(key="undo", at=now), now)
        else:
            raise AssertionError(f"the machine waits for nothing it was given: {pending}")
        seen += pending
    raise AssertionError(f"the abort did not finish within {limit} events")


def event_doubts(times: int, then: str = "ok") -> Script:
    """The calendar answers its first `times` compensates in doubt, then `then`; every release answers ok."""
    return lambda bid, n: ("in-doubt" if n <= times else then) if bid == "event" else "ok"


def records(seen: list[Command], event: str) -> list[dict[str, Any]]:
    return [dict(x.body) for x in seen if isinstance(x, Record) and x.event == event]


def undo_outcomes(seen: list[Command], branch: str) -> list[str]:
    return [
        str(x.evidence["outcome"])
        for x in seen
        if isinstance(x, Record) and x.event in ("abort", "compensate") and x.body.get("branchId") == branch
    ]


def test_HATP_TXN_30_an_undo_answered_in_doubt_is_sent_again_and_its_ok_ends_aborted() -> None:
    c, out = compensating()
    seen, end = run_abort(c, out, event_doubts(1))
    assert [x.branch_id for x in seen if isinstance(x, SendCompensate)] == ["event", "event"]
    retry = [x.at for x in seen if isinstance(x, Arm) and x.key == "undo"]
    assert retry == [NOW + timedelta(seconds=c.config.retry_seconds)] and end == retry[0]  # every retry_seconds
    assert undo_outcomes(seen, "event") == ["in-doubt", "ok"]
    assert [x.outcome for x in seen if isinstance(x, Finish)] == [Outcome.ABORTED]
    assert c.state is TxnState.ABORTED and "event" in c._d.phase2.undone and not c._d.phase2.undo_failed
    assert not records(seen, "undo.in-doubt") and not records(seen, "recovery.offered")


def test_HATP_TXN_30_an_undo_in_doubt_is_sent_again_before_the_rest_of_the_abort() -> None:
    c, out = compensating()
    sends: list[str] = []

    def script(bid: str, n: int) -> str:
        sends.append(bid)
        return "in-doubt" if sends.count(bid) == 1 else "ok"

    seen, _ = run_abort(c, out, script)
    first = sends[0]
    assert sends[:2] == [first, first]  # the reverse commit order holds: the doubtful one again, then the next
    assert [x.outcome for x in seen if isinstance(x, Finish)] == [Outcome.ABORTED]


def test_HATP_TXN_31_an_undo_always_in_doubt_ends_in_needs_recovery_after_the_bound_with_recovery_offered() -> None:
    c, out = compensating(Config(undo_attempts=4))
    seen, _ = run_abort(c, out, event_doubts(99))
    assert [x.branch_id for x in seen if isinstance(x, SendCompensate)] == ["event"] * 4  # bounded
    assert records(seen, "undo.in-doubt") == [{"branchId": "event", "phase": "compensate", "attempts": 4}]
    offered = records(seen, "recovery.offered")
    assert len(offered) == 1 and offered[0]["branches"] == ["event"] and offered[0]["performed"] is False
    assert [x.outcome for x in seen if isinstance(x, Finish)] == [Outcome.NEEDS_RECOVERY]
    assert c.state is TxnState.NEEDS_RECOVERY and "event" not in c._d.phase2.undone
    assert c._d.phase2.undo_failed == []  # in doubt is not failed: the record says which it was
    # the holds were still released after the bound: the rest of the abort went on
    assert {x.branch_id for x in seen if isinstance(x, SendAbort)} >= {"seat", "room"}


def test_HATP_TXN_30_an_undo_that_gets_no_answer_is_sent_again_within_the_same_bound_HATP_TXN_31() -> None:
    c, out = compensating(Config(undo_attempts=3))
    seen, _ = run_abort(c, out, lambda bid, n: "silent" if bid == "event" else "ok")
    assert [x.branch_id for x in seen if isinstance(x, SendCompensate)] == ["event"] * 3
    assert records(seen, "undo.in-doubt") == [{"branchId": "event", "phase": "compensate", "attempts": 3}]
    assert [x.outcome for x in seen if isinstance(x, Finish)] == [Outcome.NEEDS_RECOVERY]
    assert records(seen, "recovery.offered")[0]["branches"] == ["event"]


def test_a_refused_undo_is_not_sent_again_and_ends_in_needs_recovery_as_undo_failed() -> None:
    c, out = compensating()
    seen, _ = run_abort(c, out, event_doubts(0, then="refused"))
    assert [x.branch_id for x in seen if isinstance(x, SendCompensate)] == ["event"]
    assert c._d.phase2.undo_failed == ["event"] and not records(seen, "undo.in-doubt")
    assert [x.outcome for x in seen if isinstance(x, Finish)] == [Outcome.NEEDS_RECOVERY]


def test_HATP_TXN_31_a_replacement_retries_an_undo_left_in_doubt_counting_the_sends_in_the_record() -> None:
    plan = trip_plan(NOW)
    doubt = receipt(plan, "event", "compensate", "in-doubt", code="UPSTREAM_NO_ANSWER")
    logged = [
        *logged_commit(plan),
        {"event": "decision", "body": {"decision": "abort", "reason": "COMMIT_REFUSED: pay refused its commit"}},
        *(
            {"event": "abort", "body": {"branchId": b}, "evidence": receipt(plan, b, "abort")}
            for b in ("seat", "room", "pay")
        ),
        {"event": "compensate", "body": {"branchId": "event"}, "evidence": doubt},
        {"event": "call.failed", "body": {"branchId": "event", "phase": "compensate", "reason": "no answer"}},
    ]
    c = Coordinator.recover(plan, logged, "abort", RING, Config(undo_attempts=3))
    out = c.handle(Start(), NOW)
    assert [x.branch_id for x in out if isinstance(x, SendCompensate | SendAbort)] == ["event"]  # sent again
    seen, _ = run_abort(c, out, event_doubts(99))
    assert [x.branch_id for x in seen if isinstance(x, SendCompensate)] == ["event"]  # two of three were sent before
    assert records(seen, "undo.in-doubt") == [{"branchId": "event", "phase": "compensate", "attempts": 3}]
    assert [x.outcome for x in seen if isinstance(x, Finish)] == [Outcome.NEEDS_RECOVERY]
    again = Coordinator.recover(plan, logged, "abort", RING, Config(undo_attempts=3))
    done, _ = run_abort(again, again.handle(Start(), NOW), event_doubts(0))
    assert [x.outcome for x in done if isinstance(x, Finish)] == [Outcome.ABORTED]  # its ok settles it


def test_HATP_TXN_31_a_replacement_keeps_offering_what_its_predecessor_stopped_sending() -> None:
    plan = trip_plan(NOW)
    logged = [
        *logged_commit(plan),
        {"event": "decision", "body": {"decision": "abort", "reason": "COMMIT_REFUSED: pay refused its commit"}},
        {"event": "undo.in-doubt", "body": {"branchId": "event", "phase": "compensate", "attempts": 10}},
    ]
    c = Coordinator.recover(plan, logged, "abort", RING)
    seen, _ = run_abort(c, c.handle(Start(), NOW), lambda bid, n: "ok")
    assert not any(isinstance(x, SendCompensate) for x in seen)
    assert records(seen, "recovery.offered")[0]["branches"] == ["event"]
    assert [x.outcome for x in seen if isinstance(x, Finish)] == [Outcome.NEEDS_RECOVERY]


def test_HATP_TXN_33_an_undo_bound_below_one_send_is_refused() -> None:
    with pytest.raises(HatpError) as refused:
        Config(undo_attempts=0)
    assert refused.value.rule == "HATP-TXN-33" and refused.value.code == "BAD_CONFIG"
    assert refused.value.path == "$.undoAttempts"


def test_HATP_TXN_30_a_forged_ok_for_an_undo_is_refused_never_counted_as_undone_and_the_undo_is_sent_again() -> None:
    c, out = compensating(Config(undo_attempts=2))
    (send,) = [x for x in out if isinstance(x, SendAbort | SendCompensate)]  # the first undo: a hold's release
    bid, phase = send.branch_id, "compensate" if isinstance(send, SendCompensate) else "abort"
    forger = SigningKey.generate(["participant"], kid=KEYS[WHO[bid]].kid)  # the participant's kid, another key
    body = {k: v for k, v in receipt(c.plan, bid, phase).items() if k != "signature"}
    forged = c.handle(ReceiptAnswer(branch_id=bid, receipt=sign_object(body, forger)), NOW)
    refusals = records(forged, "evidence.refused")
    assert [(r["branchId"], r["rule"], r["code"]) for r in refusals] == [(bid, "HATP-TXN-2", "BAD_SIGNATURE")]
    assert not records(forged, phase) and bid not in c._d.phase2.undone  # never counted as released
    assert [x.key for x in forged if isinstance(x, Arm)] == ["undo"]  # sent again, within the bound
    assert c.state is TxnState.ABORTING

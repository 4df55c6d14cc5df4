"""A poll of an ask the gateway already holds that gets no answer is neither a yes nor a no (HATP-TXN-38): the
coordinator polls again until the approval deadline, which alone ends the wait; a refusal still aborts."""

from __future__ import annotations

from datetime import timedelta

from hatp_mcp.core.txn.events import Arm, CallFailed, Decide, Poll, Record, SendAbort, Timer, TxnState
from tests.core.txn.test_resume import NOW, started, waiting

LATER = NOW + timedelta(minutes=5)


def no_answer(unanswered: bool) -> CallFailed:
    return CallFailed(
        branch_id="finance", phase="approval", reason="hatp/gateway/status: no answer", unanswered=unanswered
    )


def test_HATP_TXN_38_a_poll_that_gets_no_answer_is_recorded_and_polled_again_not_aborted() -> None:
    c, _ = started(waiting(), LATER)
    out = c.handle(no_answer(True), LATER)
    assert c.state is TxnState.APPROVING
    assert [(x.event, x.body["requirementId"]) for x in out if isinstance(x, Record)] == [
        ("approval.unanswered", "finance")
    ]
    (poll,) = [x for x in out if isinstance(x, Arm) and x.key == "poll:finance"]
    assert poll.at == LATER + timedelta(seconds=c.config.poll_seconds)
    assert not any(isinstance(x, Decide | SendAbort) for x in out)
    again = c.handle(Timer(key=poll.key, at=poll.at), poll.at)
    assert [x.requirement_id for x in again if isinstance(x, Poll)] == ["finance"]


def test_HATP_TXN_38_the_approval_deadline_still_ends_a_wait_the_gateway_never_answers() -> None:
    c, out = started(waiting(), LATER)
    (deadline,) = [x for x in out if isinstance(x, Arm) and x.key == "deadline"]
    c.handle(no_answer(True), LATER)
    ended = c.handle(Timer(key="deadline", at=deadline.at), deadline.at)
    assert c.state is TxnState.ABORTING
    assert [x.reason.split(":")[0] for x in ended if isinstance(x, Decide)] == ["APPROVAL_TIMEOUT"]


def test_HATP_TXN_38_a_refusal_from_the_gateway_still_aborts() -> None:
    c, _ = started(waiting(), LATER)
    out = c.handle(no_answer(False), LATER)
    assert c.state is TxnState.ABORTING
    assert [x.reason.split(":")[0] for x in out if isinstance(x, Decide)] == ["APPROVER_FAILED"]

"""Phase 2 of the pure coordinator machine: after the final branch the holds commit together, and every answer of
that step is waited for (in doubt, refused) before the transaction ends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from demo.trip_world import AIRLINE, CALENDAR, HOTEL, PAYMENTS, trip_plan
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.events import (
    CallFailed,
    Command,
    Finish,
    Outcome,
    ReceiptAnswer,
    Record,
    SendCommit,
    Start,
    Timer,
    TxnState,
)
from hatp_mcp.core.txn.machine import Coordinator

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
KEYS = {
    uri: SigningKey.generate(["participant"], kid=uri.split("//")[1][:5])
    for uri in (AIRLINE, HOTEL, CALENDAR, PAYMENTS)
}
RING = Keyring()
for _uri, _k in KEYS.items():
    RING.add_signer(_k, _uri)
WHO = {"seat": AIRLINE, "room": HOTEL, "event": CALENDAR, "pay": PAYMENTS}


def receipt(plan: Plan, branch: str, phase: str, outcome: str = "ok", **extra: Any) -> dict[str, Any]:
    body = {
        "type": "hatp.receipt",
        "txnId": plan.txn_id,
        "branchId": branch,
        "planDigest": plan.digest(),
        "issuedAt": format_ts(NOW),
        "participant": WHO[branch],
        "phase": phase,
        "outcome": outcome,
        **extra,
    }
    return sign_object(body, KEYS[WHO[branch]])


def final_committed() -> tuple[Coordinator, list[Command]]:
    """A replacement coordinator whose log says: commit decided, the calendar event and the payment committed."""
    plan = trip_plan(NOW)
    lease = {
        "leaseExpiresAt": format_ts(NOW + timedelta(seconds=900)),
        "holdHorizon": format_ts(NOW + timedelta(hours=4)),
    }
    logged = [
        {"event": "txn.begin", "body": {"mode": "parallel"}},
        *(
            {"event": "receipt", "body": {"branchId": h}, "evidence": receipt(plan, h, "prepare", **lease)}
            for h in ("seat", "room")
        ),
        {"event": "decision", "body": {"decision": "commit"}},
        {
            "event": "commit",
            "body": {"branchId": "event"},
            "evidence": receipt(plan, "event", "commit", undoToken="e1"),
        },
        {"event": "commit", "body": {"branchId": "pay"}, "evidence": receipt(plan, "pay", "commit")},
    ]
    c = Coordinator.recover(plan, logged, "commit", RING)
    return c, c.handle(Start(), NOW)


def commit_answer(c: Coordinator, branch: str, outcome: str = "ok", **extra: Any) -> ReceiptAnswer:
    return ReceiptAnswer(branch_id=branch, receipt=receipt(c.plan, branch, "commit", outcome, **extra))


def test_after_the_final_branch_the_holds_commit_together_and_the_last_answer_ends_it() -> None:
    c, out = final_committed()
    # HATP-TXN-5: compensate, then final, then the holds; once the final has committed they are sent in one step
    assert sorted(x.branch_id for x in out if isinstance(x, SendCommit)) == ["room", "seat"]
    first = c.handle(commit_answer(c, "seat"), NOW)
    assert not any(isinstance(x, SendCommit | Finish) for x in first)  # the room's commit is still out
    last = c.handle(commit_answer(c, "room"), NOW)
    assert [x.outcome for x in last if isinstance(x, Finish)] == [Outcome.COMMITTED]
    assert c.state is TxnState.COMMITTED


def test_a_hold_in_doubt_while_the_other_hold_commits_is_retried_before_the_transaction_ends() -> None:
    c, _ = final_committed()
    out = c.handle(CallFailed(branch_id="seat", phase="commit", reason="no answer"), NOW)
    assert c.state is TxnState.IN_DOUBT  # HATP-TXN-10
    assert any(isinstance(x, Record) and x.event == "commit.in-doubt" for x in out)
    other = c.handle(commit_answer(c, "room"), NOW)
    assert not any(isinstance(x, Finish | SendCommit) for x in other) and c.state is TxnState.IN_DOUBT
    retry_at = NOW + timedelta(seconds=c.config.retry_seconds)
    retried = c.handle(Timer(key="retry:seat", at=retry_at), retry_at)
    assert [x.branch_id for x in retried if isinstance(x, SendCommit)] == ["seat"]
    done = c.handle(commit_answer(c, "seat"), retry_at)
    assert [x.outcome for x in done if isinstance(x, Finish)] == [Outcome.COMMITTED]


def test_a_hold_refused_after_the_final_is_offered_recovery_once_every_hold_of_the_step_answered() -> None:
    c, _ = final_committed()
    refused = c.handle(commit_answer(c, "seat", "refused", code="PRECONDITION_CHANGED"), NOW)
    assert not any(isinstance(x, Finish) for x in refused)  # the room's commit is still out
    out = c.handle(commit_answer(c, "room"), NOW)
    offered = [x.body for x in out if isinstance(x, Record) and x.event == "recovery.offered"]
    assert offered and offered[0]["branches"] == ["seat"] and offered[0]["performed"] is False  # HATP-TXN-11
    assert [x.outcome for x in out if isinstance(x, Finish)] == [Outcome.NEEDS_RECOVERY]

"""The journal record: signed, hash-chained entries of one saga, verified offline, replayed through the machine."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.journal.events import Rollback, StartStep, StepCompleted, UndoAnswered, Write
from hatp_mcp.core.journal.machine import SagaMachine
from hatp_mcp.core.journal.record import JournalChain, verify_journal
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object

KEY = SigningKey.generate(["journal"], kid="journal-1")
RING = Keyring()
RING.add_signer(KEY)
T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def rolled_back_record() -> dict[str, Any]:
    """Two steps done, a rollback that undoes both: the record the driver would have written."""
    m, cmds = SagaMachine.begin("saga-7", "return-882")
    chain = JournalChain("saga-7", KEY, "journal://test")
    events = [
        StartStep(step_id="s1", tool="mark_returned", args={"item": "882"}, has_undo=True),
        StepCompleted(step_id="s1", output={"ok": True}),
        StartStep(step_id="s2", tool="refund", args={"usd": "40.00"}, has_undo=True),
        StepCompleted(step_id="s2", output={"refund": "r-1"}),
        Rollback(reason="label failed"),
        UndoAnswered(step_id="s2", ok=True),
        UndoAnswered(step_id="s1", ok=True),
    ]
    for ev in events:
        cmds += m.handle(ev, T0)
    for n, c in enumerate(x for x in cmds if isinstance(x, Write)):
        chain.appended(chain.sign(c.event, format_ts(T0 + timedelta(seconds=n)), c.body))
    return chain.record("return-882")


def resign(event: dict[str, Any]) -> dict[str, Any]:
    return sign_object(event, KEY)


def rules(problems: list[Any]) -> set[str]:
    return {p.rule for p in problems}


def test_a_sound_journal_record_verifies_HATP_JRN_12() -> None:
    record = rolled_back_record()
    assert verify_journal(record, RING) == []
    assert record["events"][-1]["body"] == {"status": "ROLLED_BACK", "eventCount": len(record["events"]) - 1}


def test_a_tampered_entry_is_refused_by_its_signature_HATP_JRN_12() -> None:
    record = rolled_back_record()
    record["events"][3]["body"]["args"] = {"usd": "4000.00"}  # step.started of the refund, changed after signing
    problems = verify_journal(record, RING)
    assert [(p.index, p.rule) for p in problems] == [(3, "HATP-SIG-4"), (4, "HATP-JRN-12")]  # and the link after it


def test_a_removed_event_breaks_the_sequence_and_the_chain_HATP_JRN_12() -> None:
    record = rolled_back_record()
    del record["events"][5]
    problems = verify_journal(record, RING)
    assert {p.index for p in problems if p.rule == "HATP-JRN-12"} >= {5}
    assert any("seq is" in p.reason for p in problems) and any("chain is broken" in p.reason for p in problems)


def test_a_cut_tail_is_refused_unless_open_is_asked_HATP_JRN_12() -> None:
    record = rolled_back_record()
    record["events"] = record["events"][:4]
    problems = verify_journal(record, RING)
    assert [p.rule for p in problems] == ["HATP-JRN-12"] and "does not end in saga.closed" in problems[0].reason
    assert verify_journal(record, RING, require_closed=False) == []


def test_a_key_without_the_journal_role_is_refused_HATP_JRN_12() -> None:
    other = SigningKey.generate(["coordinator"], kid="coord-9")
    ring = Keyring()
    ring.add_signer(other)
    record = rolled_back_record()
    for i, ev in enumerate(record["events"]):
        record["events"][i] = sign_object(ev, other)
    problems = verify_journal(record, ring)
    sig5 = [p.index for p in problems if p.rule == "HATP-SIG-5"]  # (re-signing broke the links too)
    assert sig5 == list(range(len(record["events"])))


def test_a_validly_signed_record_whose_rollback_skipped_a_completed_step_is_refused_HATP_JRN_3() -> None:
    """The journal's own key signs a lie: the close comes right after s2's undo, s1 never undone."""
    good = rolled_back_record()
    events = copy.deepcopy(good["events"])
    names = [e["event"] for e in events]
    cut = names.index("undo.done") + 1  # after s2's undo: drop s1's undo.started and undo.done
    forged = events[:cut]
    chain = JournalChain("saga-7", KEY, "journal://test", forged)
    chain.appended(chain.sign("saga.closed", events[-1]["at"], {"status": "ROLLED_BACK"}))
    problems = verify_journal(chain.record("return-882"), RING)
    assert [(p.index, p.rule) for p in problems] == [(cut, "HATP-JRN-3")]
    assert "step s1 (mark_returned) is completed and was not undone" in problems[0].reason


def test_a_validly_signed_record_with_an_undo_run_twice_is_refused_HATP_JRN_9() -> None:
    good = rolled_back_record()
    events = copy.deepcopy(good["events"])
    cut = [e["event"] for e in events].index("undo.started") + 1
    chain = JournalChain("saga-7", KEY, "journal://test", events[:cut])
    chain.appended(chain.sign("undo.started", events[cut]["at"], {"stepId": "s2", "attempt": 2}))
    problems = verify_journal(chain.record("return-882"), RING, require_closed=False)
    assert [(p.index, p.rule) for p in problems] == [(cut, "HATP-JRN-9")]


def test_the_chain_refuses_to_sign_out_of_order_or_after_close() -> None:
    chain = JournalChain("saga-1", KEY, "journal://test")
    with pytest.raises(ValueError, match="first event"):
        chain.sign("step.started", format_ts(T0), {})
    record = rolled_back_record()
    closed = JournalChain("saga-7", KEY, "journal://test", record["events"])
    with pytest.raises(ValueError, match="closed"):
        closed.sign("saga.recovered", format_ts(T0), {})

"""Asks beyond approve: choose, form, text. Routed like approvals; an answer that does not fit is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.gateway.ask_evidence import build_answer, routing_record
from hatp_mcp.core.gateway.asks import answer, ask_digest, open_question
from hatp_mcp.core.gateway.machine import AskState, decide, decline, state_of
from hatp_mcp.core.model.gateway import AskRecord, Option
from hatp_mcp.errors import HatpError
from tests.acme_org import GATEWAY_ID, directory, h

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
NONCE = "nonce-0123456789abcdef"
SCHEMA = {
    "type": "object",
    "properties": {"costCenter": {"type": "string", "pattern": "^CC-[0-9]{4}$"}, "nights": {"type": "integer"}},
    "required": ["costCenter"],
    "additionalProperties": False,
}


def q(kind: str, **kw: Any) -> AskRecord:
    return open_question(
        ask_id=f"ask-{kind}",
        kind=kind,
        address=kw.pop("address", "human://acme.com/carol"),
        question="Which hotel should Dana stay in?",
        directory=directory(),
        gateway=GATEWAY_ID,
        now=NOW,
        requester=h("dana"),
        **kw,
    )


def test_a_choice_in_the_options_is_answered_and_the_answer_names_the_question() -> None:
    rec = answer(
        q("choose", options=[Option(id="adlon", label="Adlon"), Option(id="motel", label="Motel One")]),
        h("carol"),
        "motel",
        NOW,
    )
    assert state_of(rec) is AskState.ANSWERED
    ans = build_answer(rec, GATEWAY_ID, NONCE, NOW)
    assert ans is not None and (ans.value, ans.answerer, ans.kind) == ("motel", h("carol"), "choose")
    assert ans.subject_digest == ask_digest(rec.ask)
    assert rec.ask.question is not None and rec.ask.question.label == "agent-written"


def test_an_answer_outside_the_options_is_refused_under_HATP_ASK_2_and_nothing_is_answered() -> None:
    rec = q("choose", options=[Option(id="adlon", label="Adlon")])
    with pytest.raises(HatpError) as e:
        answer(rec, h("carol"), "ritz", NOW)
    assert e.value.rule == "HATP-ASK-2" and e.value.code == "ANSWER_DOES_NOT_FIT"
    assert state_of(rec) is AskState.PENDING and build_answer(rec, GATEWAY_ID, NONCE, NOW) is None


def test_a_form_is_validated_against_its_json_schema_under_HATP_ASK_3() -> None:
    rec = q("form", form_schema=SCHEMA)
    with pytest.raises(HatpError) as e:
        answer(rec, h("carol"), {"costCenter": "42"}, NOW)
    assert e.value.rule == "HATP-ASK-3" and e.value.path == "$.value.costCenter"
    with pytest.raises(HatpError) as e:
        answer(rec, h("carol"), "CC-0042", NOW)
    assert e.value.rule == "HATP-ASK-3"
    done = answer(rec, h("carol"), {"costCenter": "CC-0042", "nights": 2}, NOW)
    assert done.answer_value == {"costCenter": "CC-0042", "nights": 2}


def test_a_text_answer_must_be_non_empty_and_within_its_length_under_HATP_ASK_4() -> None:
    rec = q("text", max_length=10)
    for bad in ["", "   ", "x" * 11, 7]:
        with pytest.raises(HatpError) as e:
            answer(rec, h("carol"), bad, NOW)
        assert e.value.rule == "HATP-ASK-4"
    assert answer(rec, h("carol"), "window", NOW).answer_value == "window"


def test_malformed_questions_are_refused_under_HATP_ASK_1() -> None:
    for kw in [{"kind": "choose"}, {"kind": "form"}, {"kind": "form", "form_schema": {"type": 12}}, {"kind": "vote"}]:
        kind = kw.pop("kind")
        with pytest.raises(HatpError) as e:
            q(kind, **kw)
        assert e.value.rule == "HATP-ASK-1"


def test_approve_and_answer_do_not_cross_kinds_under_HATP_ASK_6() -> None:
    rec = q("text")
    with pytest.raises(HatpError) as e:
        decide(rec, h("carol"), "approve", NOW)
    assert e.value.rule == "HATP-ASK-6"


def test_declining_a_question_passes_it_to_the_next_person_in_the_pool_under_HATP_ASK_5() -> None:
    rec = q("text", address="human://acme.com/pool/security-leads?skill=sox")
    first = next(x.human for x in routing_record(rec).humans if x.status == "asked")
    rec = decline(rec, first, NOW + timedelta(minutes=1))
    second = next(x.human for x in routing_record(rec).humans if x.status == "asked")
    assert second != first
    assert answer(rec, second, "ok", NOW + timedelta(minutes=2)).answered_by == second


def test_the_requester_cannot_answer_their_own_question_under_HATP_GW_5() -> None:
    rec = q("text", address="human://acme.com/dana")
    assert state_of(rec) is AskState.EXHAUSTED
    assert routing_record(rec).humans[0].rule == "HATP-GW-5"

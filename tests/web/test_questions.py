"""The answer controls of question asks (hatp_mcp/web/questions.py, HATP-GW-80): drawn from the structured ask, every
value escaped, what the agent wrote labelled; a schema the page cannot lay out as fields is answered as JSON."""

from __future__ import annotations

from typing import Any

from hatp_mcp.core.model.gateway import Ask, Option
from hatp_mcp.web.questions import answer_controls

HOSTILE = '"><script>alert(1)</script>'


def ask(kind: str, **extra: Any) -> Ask:
    return Ask(
        ask_id="q-1",
        kind=kind,  # type: ignore[arg-type]
        address="human://acme.com/bob",
        decide_by="2026-12-01T12:00:00Z",
        gateway="https://acme.com/hatp/gateway",
        issued_at="2026-12-01T10:00:00Z",
        **extra,
    )


def test_HATP_GW_80_choose_enum_and_field_texts_are_escaped_and_labelled_agent_written() -> None:
    choose = answer_controls(ask("choose", options=[Option(id="adlon", label=HOSTILE)]))
    schema = {
        "type": "object",
        "properties": {HOSTILE: {"type": "string", "description": HOSTILE}, "room": {"enum": [HOSTILE, 2]}},
    }
    form = answer_controls(ask("form", form_schema=schema))
    for html in (choose, form):
        assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<strong>written by the agent:</strong> &quot;&gt;&lt;script&gt;" in choose
    assert 'data-field="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in form
    assert '<option value="2">2</option>' in form  # an enum value is sent back as the JSON it is


def test_HATP_GW_80_a_schema_without_fields_is_answered_as_json_and_a_text_ask_is_bounded() -> None:
    free = answer_controls(ask("form", form_schema={"type": "array"}))
    text = answer_controls(ask("text", max_length=12))
    default = answer_controls(ask("text"))
    assert "data-kind=form-json" in free and "id=answer-json" in free
    assert "maxlength=12" in text and "at most 12 characters" in text and "maxlength=10000" in default
    assert answer_controls(ask("approve")) == ""

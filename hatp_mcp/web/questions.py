"""The controls a person answers a choose / form / text ask with, rendered from the structured ask (spec/gateway.md
HATP-GW-80, HATP-GW-72): radio buttons for a choose ask's options, one input per property of a form ask's JSON
Schema (text, number, checkbox, a list for an `enum`, JSON for anything else), a text area bounded by a text ask's
`maxLength`. Every value is HTML-escaped; what the agent wrote (option labels, a field's title or description)
is shown labelled "written by the agent". The script (pages.py INBOX_JS) reads the controls back into the answer by
their `data-type`; the gateway checks that answer against the ask (HATP-ASK-2..4) before it issues a challenge,
so what does not fit is never signed. Pure: takes the ask, returns a string; no IO.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from hatp_mcp.core.model.gateway import Ask

__all__ = ["answer_controls"]

_TEXT_DEFAULT = 10_000  # as core/gateway/asks.py: a text answer without maxLength


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _agent_note(text: object) -> str:
    return f" <span class=agent-written><strong>written by the agent:</strong> {_e(text)}</span>"


def _choose(ask: Ask) -> str:
    items = "".join(
        f'<li><label><input type=radio name=choice value="{_e(o.id)}" data-option="{_e(o.id)}"> '
        f"<code>{_e(o.id)}</code>{_agent_note(o.label)}</label></li>"
        for o in ask.options
    )
    return f"<fieldset id=answer data-kind=choose><legend>Pick one</legend><ul>{items}</ul></fieldset>"


def _field(name: str, prop: Any, required: bool) -> str:
    prop = prop if isinstance(prop, dict) else {}
    notes = "".join(_agent_note(prop[k]) for k in ("title", "description") if isinstance(prop.get(k), str))
    label = f"<code>{_e(name)}</code>{' (required)' if required else ''}{notes}"
    attrs = f'data-field="{_e(name)}" id="field-{_e(name)}" aria-label="{_e(name)}"'
    kind = prop.get("type")
    if isinstance(prop.get("enum"), list):
        choices = "".join(
            f'<option value="{_e(json.dumps(v))}">{_e(v if isinstance(v, str) else json.dumps(v))}</option>'
            for v in prop["enum"]
        )
        control = f'<select {attrs} data-type=json><option value="">(choose)</option>{choices}</select>'
    elif kind == "string":
        bound = f" maxlength={int(prop['maxLength'])}" if isinstance(prop.get("maxLength"), int) else ""
        control = f"<input type=text {attrs} data-type=string{bound}>"
    elif kind in ("integer", "number"):
        step = "1" if kind == "integer" else "any"
        control = f"<input type=number step={step} {attrs} data-type=number>"
    elif kind == "boolean":
        control = f"<input type=checkbox {attrs} data-type=boolean>"
    else:
        control = f"<textarea {attrs} data-type=json rows=3 cols=60></textarea> (as JSON)"
    return f"<li><label>{label} {control}</label></li>"


def _form(ask: Ask) -> str:
    schema = ask.form_schema or {}
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, dict) or not props:
        # A schema the page cannot lay out as fields: the answer is typed as JSON, and checked like any other.
        return (
            "<fieldset id=answer data-kind=form-json><legend>Your answer, as JSON</legend>"
            '<textarea id=answer-json data-type=json rows=6 cols=80 aria-label="answer as JSON"></textarea>'
            "</fieldset>"
        )
    required = set(schema.get("required") or [])
    fields = "".join(_field(str(name), prop, name in required) for name, prop in props.items())
    return f"<fieldset id=answer data-kind=form><legend>Fill in</legend><ul>{fields}</ul></fieldset>"


def _text(ask: Ask) -> str:
    limit = ask.max_length or _TEXT_DEFAULT
    return (
        f"<fieldset id=answer data-kind=text><legend>Your answer (at most {limit} characters)</legend>"
        f'<textarea id=answer-text maxlength={limit} rows=6 cols=80 aria-label="your answer"></textarea></fieldset>'
    )


def answer_controls(ask: Ask) -> str:
    """The answer controls and the buttons of a question ask (empty for an approval)."""
    render = {"choose": _choose, "form": _form, "text": _text}.get(ask.kind)
    if render is None:
        return ""
    return (
        f"{render(ask)}<p id=actions>"
        "<button type=button id=answer-submit>Answer with your passkey</button> "
        "<button type=button data-decision=decline>Pass it on</button></p>"
    )

"""The notice a dead letter becomes when the journal alerts a person through the gateway's delivery channels
(HATP-JRN-16). Pure: no IO, no clock.

It says what a person needs to find and finish the step: the saga (its id and, labelled, the name the agent gave
it), the step, the journal's tool, for an agent's step the server and tool of the undo it registered, the phase,
the attempts, the idempotency key to reuse, and the error (bounded, labelled as the tool's words). It carries no
argument or output values (they stay in the journal's dead letter, which `saga_status` and the store show to
whoever may see them) and no contact detail: a channel is not the place for them, as for the gateway's notices
(spec/gateway.md HATP-GW-60).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hatp_mcp.core.gateway.notice import Notice

__all__ = ["ERROR_CHARS", "dead_letter_key", "dead_letter_notice"]

ERROR_CHARS = 300  # the most of a tool's error text a notice repeats


def _text(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else "?"
    text = " ".join(text.split())  # one line: no header or layout injection through a name or an error
    return text if len(text) <= limit else text[: limit - 1] + "…"


def dead_letter_key(entry: Mapping[str, Any], human: str) -> str:
    """One key per dead letter and person: every resend of the alert carries it (an email's Message-ID)."""
    return f"journal|{_text(entry.get('sagaId'), 200)}|{_text(entry.get('stepId'))}|{_text(entry.get('phase'))}|{human}"


def dead_letter_notice(entry: Mapping[str, Any], human: str, link: str) -> Notice:
    """The alert for one dead-letter entry (as the journal's machine writes it) to `human`."""
    saga_id = _text(entry.get("sagaId"), 200)
    step = _text(entry.get("stepId"))
    phase = _text(entry.get("phase"))
    lines = [
        f"A journal step needs a person: saga {saga_id}, step {step} ({phase}).",
        f"Saga name (as the agent gave it): {_text(entry.get('saga'))}",
        f"Tool: {_text(entry.get('tool'))}",
    ]
    given = entry.get("input")
    undo = given.get("undo") if isinstance(given, Mapping) else None
    if isinstance(undo, Mapping):
        lines.append(f"Its undo: tool {_text(undo.get('tool'))} on server {_text(undo.get('server'))}")
    if isinstance(entry.get("attempts"), int):
        lines.append(f"Attempts: {entry['attempts']}")
    if isinstance(entry.get("key"), str):
        lines.append(f"Idempotency key (reuse it if you make the call by hand): {_text(entry['key'], 300)}")
    lines.append(f"Error (the tool's words): {_text(entry.get('error'), ERROR_CHARS)}")
    lines.append("The step's arguments and output are in the journal's dead letter (saga_status on the journal).")
    return Notice(
        key=dead_letter_key(entry, human),
        ask_id=saga_id,
        human=human,
        kind="dead-letter",
        subject=f"Journal: undo needs a person ({saga_id} {step})",
        text="\n".join(lines),
        link=link,
    )

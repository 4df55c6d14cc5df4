"""Who an open ask waits for, in words an agent may pass on: `ask_waiting(rec, card_of, inbox_url)`; and how many
open asks wait for each person (`open_asks_of`, HATP-GW-9, HATP-GW-95: the one count the gateway's routing and the
Directory's own resolve both use).

The people asked and not yet decided, by the display name and roles of their Directory-signed card (never an
address or a contact detail), and the ask's page in the inbox (the same link a notice carries), so an agent can
tell its user who must act and where (spec/mcp-binding.md HATP-MCP-54). Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hatp_mcp.core.gateway.notice import ask_link
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.gateway_messages import AskedPerson, AskWaiting

__all__ = ["ask_waiting", "open_asks_of"]


def open_asks_of(records: Iterable[AskRecord | None]) -> dict[str, int]:
    """HATP-GW-9: how many of these asks wait for each person now: pending, the person asked and not yet decided
    (the live term added to a card's static `capacity.open`)."""
    counts: dict[str, int] = {}
    for rec in records:
        if rec is None or rec.state != "pending":
            continue
        for seat in rec.seats:
            if seat.status == "asked":
                counts[seat.human] = counts.get(seat.human, 0) + 1
    return counts


def ask_waiting(rec: AskRecord, card_of: Callable[[str], HumanCard | None], inbox_url: str | None) -> AskWaiting | None:
    """The ask's waiting words while it is pending, else None. A person without a verified card (removed since
    they were asked) is named as such only: their address does not leave the gateway."""
    if rec.state != "pending":
        return None
    people = []
    for seat in rec.seats:
        if seat.status != "asked":
            continue
        card = card_of(seat.human)
        if card is None:
            people.append(AskedPerson(display_name="an approver without a card"))
        else:
            people.append(AskedPerson(display_name=card.display_name, roles=list(card.roles)[:32]))
    link = ask_link(inbox_url, rec.ask.ask_id) if inbox_url else None
    return AskWaiting(ask_id=rec.ask.ask_id, people=people, link=link)

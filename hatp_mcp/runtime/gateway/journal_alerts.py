"""The journal's alert hook over the gateway's delivery channels (HATP-JRN-16): each dead letter is sent to the
people a configured address names (a person, or a role such as `human://acme.com/role/security-leads`).

The people are the members of the address on the organisation's Directory-signed cards; each is tried on the push
channels their card lists (email, chat, sms), in the card's order, for which the organisation's delivery settings
(`ORG/gateway.json`) configure a sender and its private contacts file holds an address, the first that accepts
winning, as the gateway's Deliverer does (hatp_mcp/runtime/gateway/delivery). The notice is the core's
(hatp_mcp/core/journal/alert.py). The hook returns once at least one person was reached; when nobody was, it raises
`AlertUndelivered` and the journal leaves the dead letter unalerted, to be sent again when it next opens (under
the same key). Contact addresses are read here, at send time, and never logged or put in a notice or an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hatp_mcp.core.gateway.address import parse_address
from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.journal.alert import dead_letter_notice
from hatp_mcp.runtime.gateway.delivery.channels import DeliveryFailed, Sender
from hatp_mcp.runtime.gateway.delivery.worker import PUSH_KINDS

__all__ = ["AlertUndelivered", "DeliveredAlert", "Reach"]


class AlertUndelivered(Exception):
    """No person the alert address names could be reached on any channel (the reasons name no address)."""


@dataclass(frozen=True, slots=True)
class Reach:
    """What one alert did for one person: the channel that took it (None: none did) and each failure's reason."""

    human: str
    channel: str | None
    failures: tuple[str, ...] = ()


@dataclass
class DeliveredAlert:
    """Call it with a dead-letter entry (it is the `alert` of `Journal`). `address`: whom to tell; `directory` and
    `contacts` (human -> {kind: address}): the organisation's; `senders`: one per configured channel kind;
    `link`: where the person goes to finish the step. Raises HatpError (HATP-ADDR-*) for a bad address."""

    address: str
    directory: Directory
    contacts: Mapping[str, Mapping[str, str]]
    senders: Mapping[str, Sender]
    link: str
    sent: list[Reach] = field(default_factory=list)  # every attempt's outcome, for the operator's log and tests

    def __post_init__(self) -> None:
        self._address = parse_address(self.address, "alert.address")

    def people(self) -> list[str]:
        return [card.id for card in self.directory.members(self._address)]

    def channels_for(self, human: str) -> list[str]:
        card = self.directory.card(human)
        if card is None:
            return []
        book = self.contacts.get(human, {})
        kinds = [c.type for c in card.channels if c.type in PUSH_KINDS]
        return [k for k in dict.fromkeys(kinds) if k in self.senders and k in book]

    async def __call__(self, entry: dict[str, Any]) -> None:
        """Raises AlertUndelivered when nobody was reached."""
        reached: list[Reach] = []
        for human in self.people():
            notice = dead_letter_notice(entry, human, self.link)
            failures: list[str] = []
            channel: str | None = None
            for kind in self.channels_for(human):
                try:
                    await self.senders[kind].send(self.contacts[human][kind], notice)
                except DeliveryFailed as exc:
                    failures.append(f"{kind}: {exc}")
                    continue
                channel = kind
                break
            if channel is None and not failures:
                failures.append("no push channel on their card with a sender and a contact")
            reached.append(Reach(human, channel, tuple(failures)))
        self.sent.extend(reached)
        if not any(r.channel for r in reached):
            told = "; ".join(f"{r.human}: {', '.join(r.failures)}" for r in reached) or "the address names nobody"
            raise AlertUndelivered(f"the dead letter of {entry.get('sagaId')} reached nobody at {self.address}: {told}")

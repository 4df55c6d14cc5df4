"""The Directory: verified Human Cards of one organisation, and resolving an address to ranked candidates.

Cards are trusted only when signed by a card-signing key (role "directory") that the organisation publishes in
its well-known document; anything else is ignored and the refusal says why. Resolving returns the eligible
(ranked) and the excluded, each with the rule id and a detail. Pure: no IO, no clock (`now` is passed in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from hatp_mcp.core.gateway.address import Address, Kind
from hatp_mcp.core.gateway.authority import card_authority_gap
from hatp_mcp.core.model.card import HumanCard, WellKnown
from hatp_mcp.core.model.wire import parse
from hatp_mcp.core.signing.keys import Keyring, SignatureError
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError

__all__ = [
    "EXCLUSION_RULES",
    "Candidate",
    "Criteria",
    "Directory",
    "Exclusion",
    "IgnoredCard",
    "Resolution",
    "load_well_known",
    "verify_card",
]

# The reason names the routing record uses, and the rule each one enforces.
EXCLUSION_RULES: dict[str, str] = {
    "authority": "HATP-GW-4",
    "separation-of-duties": "HATP-GW-5",
    "no-passkey": "HATP-GW-8",
    "capacity": "HATP-GW-9",
    "unavailable": "HATP-GW-9",
    "sla-missed": "HATP-GW-10",
    "declined": "HATP-ASK-5",
}


@dataclass(frozen=True, slots=True)
class IgnoredCard:
    """A card the Directory refused to trust: its index in the input, its id if readable, the rule and why."""

    index: int
    card_id: str | None
    rule: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Criteria:
    """What a candidate must satisfy: the action and the most the plan may move (`up_to`, per currency).
    `open_asks`: the asks the gateway has open now waiting for each person (HATP-GW-9), counted with their card's
    `capacity.open` when excluding at capacity and ranking by load."""

    action: str | None = None
    up_to: dict[str, Decimal] = field(default_factory=dict)
    requester: str | None = None
    decide_by: datetime | None = None
    require_passkey: bool = False
    open_asks: Mapping[str, int] = field(default_factory=dict)

    def open_of(self, card: HumanCard) -> int:
        """HATP-GW-9: a person's open asks: what their card reports plus what this gateway has open for them."""
        return card.capacity.open + self.open_asks.get(card.id, 0)


@dataclass(frozen=True, slots=True)
class Candidate:
    human: str
    card: HumanCard
    in_time: bool


@dataclass(frozen=True, slots=True)
class Exclusion:
    """`reason` is the routing-record name (authority, separation-of-duties, ...); `rule` its rule id."""

    human: str
    reason: str
    rule: str
    detail: str


@dataclass(frozen=True, slots=True)
class Resolution:
    eligible: list[Candidate]
    excluded: list[Exclusion]


def load_well_known(doc: Mapping[str, Any]) -> tuple[WellKnown, Keyring]:
    """Parse `/.well-known/human-card.json`. Raises HatpError HATP-CARD-3 (unusable document or keys)."""
    try:
        wk = parse(WellKnown, doc, "well-known")
        ring = Keyring.from_jwks({"keys": wk.keys})
    except (HatpError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, HatpError) else str(exc)
        raise HatpError("HATP-CARD-3", f"the well-known document is unusable: {reason}", path="$") from exc
    published = {e.roles for e in (ring.get(str(k.get("kid"))) for k in wk.keys) if e is not None}
    published_roles = {r for roles in published for r in roles}
    for role in ("directory", "gateway"):
        if role not in published_roles:
            raise HatpError(
                "HATP-CARD-3",
                f"the well-known document of {wk.organization} publishes no key with role {role!r}",
                path="$.keys",
                fix=f"publish the {role} key with roles [{role!r}]",
            )
    return wk, ring


class Directory:
    """One organisation's verified cards. Build with `Directory.load(well_known_doc, card_docs)`."""

    def __init__(self, well_known: WellKnown, keyring: Keyring, cards: Sequence[HumanCard]) -> None:
        self.well_known = well_known
        self.keyring = keyring
        self._cards = {c.id: c for c in cards}

    @classmethod
    def load(
        cls, well_known_doc: Mapping[str, Any], card_docs: Sequence[Mapping[str, Any]]
    ) -> tuple[Directory, list[IgnoredCard]]:
        """Verify every card; return the Directory of trusted ones and the ignored, each with its refusal.

        Raises HatpError HATP-CARD-3 when the well-known document itself is unusable.
        """
        wk, ring = load_well_known(well_known_doc)
        trusted: list[HumanCard] = []
        ignored: list[IgnoredCard] = []
        for i, doc in enumerate(card_docs):
            try:
                trusted.append(verify_card(doc, wk, ring, f"cards[{i}]"))
            except HatpError as exc:
                cid = doc.get("id") if isinstance(doc, Mapping) else None
                ignored.append(IgnoredCard(i, cid if isinstance(cid, str) else None, exc.rule, exc.reason))
        return cls(wk, ring, trusted), ignored

    @property
    def organization(self) -> str:
        return self.well_known.organization

    def card(self, human: str) -> HumanCard | None:
        return self._cards.get(human)

    def cards(self) -> list[HumanCard]:
        return [self._cards[k] for k in sorted(self._cards)]

    def names(self) -> dict[str, str]:
        """Display names by address, from the trusted cards: how the gateway's texts name people (HATP-GW-93, 97);
        never a contact detail."""
        return {c.id: c.display_name for c in self.cards()}

    def members(self, address: Address) -> list[HumanCard]:
        """Every card the address names (before any eligibility check), in id order."""
        if address.org != self.organization or address.kind is Kind.AGENT:
            return []
        if address.kind is Kind.PERSON:
            card = self._cards.get(address.raw)
            return [card] if card else []
        out = [c for c in self.cards() if address.name in c.roles]
        if address.skill is not None:
            out = [c for c in out if address.skill in c.skills]
        return out

    def check(self, card: HumanCard, criteria: Criteria) -> Exclusion | None:
        """Why this person may not decide, or None. Order: separation of duties, authority, passkey,
        availability, capacity (the first failing check is reported)."""
        who = card.id
        if criteria.requester is not None and who == criteria.requester:
            return _ex(who, "separation-of-duties", "the requester cannot approve their own request")
        if criteria.action is not None:
            gap = card_authority_gap(card, criteria.action, criteria.up_to)
            if gap is not None:
                return _ex(who, "authority", gap)
        if criteria.require_passkey and not any(k.type == "passkey" for k in card.keys):
            return _ex(who, "no-passkey", "the group requires a passkey and the card lists none")
        if card.availability.status == "offline":
            return _ex(who, "unavailable", "availability is offline")
        if criteria.open_of(card) >= card.capacity.max_open:
            return _ex(who, "capacity", f"{criteria.open_of(card)} of {card.capacity.max_open} asks already open")
        return None

    def resolve(self, address: Address, criteria: Criteria, now: datetime) -> Resolution:
        """Candidates for an address: eligible ones ranked (available first, then those whose SLA ends before the
        deadline, then the most free capacity, the shortest SLA, the id), and the excluded with rule and detail.
        """
        if address.passkey and not criteria.require_passkey:
            criteria = replace(criteria, require_passkey=True)
        eligible: list[Candidate] = []
        excluded: list[Exclusion] = []
        for card in self.members(address):
            why = self.check(card, criteria)
            if why is not None:
                excluded.append(why)
                continue
            in_time = (
                criteria.decide_by is None or now + timedelta(seconds=card.sla.decide_seconds) <= criteria.decide_by
            )
            eligible.append(Candidate(card.id, card, in_time))
        eligible.sort(key=lambda c: _rank(c, criteria.open_of(c.card)))
        return Resolution(eligible, excluded)


def _rank(c: Candidate, open_asks: int) -> tuple[bool, bool, Decimal, int, str]:
    """Available first, then in time, then the least loaded by live open asks (HATP-GW-9), the shortest SLA, id."""
    cap = c.card.capacity
    load = Decimal(open_asks) / Decimal(cap.max_open) if cap.max_open else Decimal(1)
    return (c.card.availability.status != "available", not c.in_time, load, c.card.sla.decide_seconds, c.human)


def _ex(human: str, reason: str, detail: str) -> Exclusion:
    return Exclusion(human, reason, EXCLUSION_RULES[reason], f"{reason}: {detail}")


def verify_card(doc: Any, wk: WellKnown, ring: Keyring, path: str = "$") -> HumanCard:
    """Trust a card only if the organisation's Directory signed exactly these bytes.

    Raises HatpError HATP-CARD-1 (unsigned, unknown signer, wrong role or altered: the SIG rule is in the reason)
    or HATP-CARD-2 (issued by someone else, or naming a person outside the organisation).
    """
    if not isinstance(doc, Mapping):
        raise HatpError("HATP-CARD-1", "a card is a JSON object", path=path)
    try:
        verify_raw(doc, ring, role="directory", path=path)
    except SignatureError as exc:
        raise HatpError(
            "HATP-CARD-1",
            f"card {doc.get('id')!r} ignored: {exc.rule} {exc.reason}",
            path=exc.path,
            fix=f"have the Directory of {wk.organization} sign the card with its published key",
            code="CARD_NOT_TRUSTED",
        ) from exc
    card = parse(HumanCard, doc, path)
    if card.issuer != wk.directory:
        raise HatpError(
            "HATP-CARD-2",
            f"card {card.id!r} ignored: issuer {card.issuer!r} is not the Directory {wk.directory!r}",
            path=f"{path}.issuer",
            code="CARD_NOT_TRUSTED",
        )
    if not card.id.startswith(f"human://{wk.organization}/"):
        raise HatpError(
            "HATP-CARD-2",
            f"card {card.id!r} ignored: it names a person outside {wk.organization}",
            path=f"{path}.id",
            code="CARD_NOT_TRUSTED",
        )
    return card

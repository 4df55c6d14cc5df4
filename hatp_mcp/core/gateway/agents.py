"""Who an agent acts for, proven: Directory-signed agent cards (HATP-CARD-4) and the agent's signed requests
(spec/gateway.md section 9, HATP-GW-47..49).

`AgentKeys.load(well_known_doc, card_docs)` keeps the cards the organisation's Directory signed; `sign_request` is
the agent's side (or the side of a process that holds the agent's key for a client that cannot sign);
`verify_request` is the gateway's, the coordinator's and a gate's: it returns the person the agent's card says it
acts for, which is then the requester, whatever the agent wrote elsewhere. Pure: no IO, no clock (`now` is
passed in), no randomness (the nonce is the caller's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.gateway.address import AddressError, Kind, parse_address
from hatp_mcp.core.gateway.directory import IgnoredCard, load_well_known
from hatp_mcp.core.gateway.proof import MAX_AGE, MAX_SKEW
from hatp_mcp.core.model.agent import AgentCard, AgentRequest
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.card import WellKnown
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.model.wire import WireError, parse
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.core.signing.keys import (
    Keyring,
    PublicKeyEntry,
    SignatureError,
    SigningKey,
)
from hatp_mcp.core.signing.models import sign_model, verify_raw
from hatp_mcp.errors import BrokenInvariant, HatpError

__all__ = ["AgentKeys", "card_of_key", "sign_request", "verify_agent_card", "verify_request"]

_CODE = "REQUESTER_NOT_PROVEN"


@dataclass(frozen=True, slots=True)
class AgentKeys:
    """The organisation's verified agent cards: agent id -> card. Build with `load` (or `from_cards` of cards
    verify_agent_card returned): nothing else makes an agent's key count."""

    cards: Mapping[str, AgentCard] = field(default_factory=dict)
    # The keyring each card's keys make, keyed by exactly those keys (id, type, public key): a pure function of
    # them, so a card replaced in `cards`, or holding other keys, never meets another card's keyring. At most one
    # entry per agent: an entry is replaced when the agent's keys change.
    _rings: dict[str, tuple[tuple[tuple[str, str, str], ...], Keyring]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def from_cards(cls, cards: Sequence[AgentCard]) -> AgentKeys:
        return cls({c.id: c for c in cards})

    @classmethod
    def load(
        cls, well_known_doc: Mapping[str, Any], card_docs: Sequence[Mapping[str, Any]]
    ) -> tuple[AgentKeys, list[IgnoredCard]]:
        """Verify every agent card; return the trusted ones and the ignored, each with its refusal (HATP-CARD-4).
        Raises HatpError HATP-CARD-3 when the well-known document itself is unusable."""
        wk, ring = load_well_known(well_known_doc)
        trusted: list[AgentCard] = []
        ignored: list[IgnoredCard] = []
        for i, doc in enumerate(card_docs):
            try:
                trusted.append(verify_agent_card(doc, wk, ring, f"agents[{i}]"))
            except HatpError as exc:
                cid = doc.get("id") if isinstance(doc, Mapping) else None
                ignored.append(IgnoredCard(i, cid if isinstance(cid, str) else None, exc.rule, exc.reason))
        return cls.from_cards(trusted), ignored

    def card(self, agent: str) -> AgentCard | None:
        return self.cards.get(agent)

    def keyring_for(self, agent: str) -> Keyring | None:
        """The agent's ed25519 keys from its verified card (role "agent"), or None without a card. Built once per
        set of keys (every gated call asks); the keyring is shared: read it, never add to it."""
        card = self.cards.get(agent)
        if card is None:
            return None
        keys = tuple((k.id, k.type, k.public_key) for k in card.keys)
        held = self._rings.get(agent)
        if held is not None and held[0] == keys:
            return held[1]
        ring = Keyring()
        for kid, kind, public_key in keys:
            if kind == "ed25519":
                jwk = {"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": public_key, "roles": ["agent"]}
                ring.add(PublicKeyEntry.from_jwk(jwk))
        self._rings[agent] = (keys, ring)
        return ring


def _card_refused(reason: str, path: str, fix: str = "") -> HatpError:
    return HatpError("HATP-CARD-4", reason, path=path, code="CARD_NOT_TRUSTED", fix=fix)


def verify_agent_card(doc: Any, wk: WellKnown, ring: Keyring, path: str = "$") -> AgentCard:
    """Trust an agent card only if the organisation's Directory signed exactly these bytes, it is issued by that
    Directory, names an agent of the organisation and one person of the organisation it acts for.

    Raises HatpError HATP-CARD-4."""
    if not isinstance(doc, Mapping):
        raise _card_refused("an agent card is a JSON object", path)
    try:
        verify_raw(doc, ring, role="directory", path=path)
    except SignatureError as exc:
        raise _card_refused(
            f"agent card {doc.get('id')!r} ignored: {exc.rule} {exc.reason}",
            exc.path,
            f"have the Directory of {wk.organization} sign the agent card with its published key",
        ) from exc
    try:
        card = parse(AgentCard, dict(doc), path)
    except WireError as exc:
        raise _card_refused(f"agent card ignored: {exc.reason}", exc.path) from exc
    if card.issuer != wk.directory:
        raise _card_refused(f"agent card {card.id!r} ignored: issuer is not {wk.directory!r}", f"{path}.issuer")
    for member, want, what in ((card.id, Kind.AGENT, "agent"), (card.acts_for, Kind.PERSON, "person")):
        try:
            addr = parse_address(member, path)
        except AddressError as exc:
            raise _card_refused(f"agent card ignored: {exc.reason}", path) from exc
        if addr.kind is not want or addr.org != wk.organization:
            raise _card_refused(
                f"agent card {card.id!r} ignored: {member!r} is not one {what} of {wk.organization}", path
            )
    return card


def card_of_key(agents: AgentKeys, key: SigningKey) -> AgentCard | None:
    """The verified agent card listing `key` (by kid and public key), if any: whom a process holding the key
    signs for. A process signing for a client that cannot sign takes agent and principal from this card only."""
    for card in agents.cards.values():
        ring = agents.keyring_for(card.id)
        entry = ring.get(key.kid) if ring is not None else None
        if entry is not None and entry.raw() == key.public_raw():
            return card
    return None


def sign_request(
    key: SigningKey, agent: str, acts_for: str, subject: str, subject_digest: str, now: datetime, *, nonce: str
) -> AgentRequest:
    """The agent's signed request about `subject` (``tool-call`` or ``plan``) with digest `subject_digest`, dated
    `now`. Raises pydantic.ValidationError for a malformed field."""
    req = AgentRequest.model_validate(
        {
            "agent": agent,
            "actsFor": acts_for,
            "subject": subject,
            "subjectDigest": subject_digest,
            "issuedAt": format_ts(now),
            "nonce": nonce,
        }
    )
    return sign_model(req, key)


def _refuse(rule: str, reason: str, path: str, fix: str) -> HatpError:
    return HatpError(rule, reason, path=path, fix=fix, code=_CODE)


def _parse(raw: object, path: str) -> tuple[AgentRequest, Mapping[str, Any]]:
    """The request and the document its signature is verified over (a parsed request's wire form, checked
    whole)."""
    fix = "send the agent's hatp.agent-request, signed with the key on its Directory-signed agent card"
    if isinstance(raw, AgentRequest):
        raw = raw.wire()
    if not isinstance(raw, Mapping):
        raise _refuse("HATP-GW-47", "no signed agent request: who the agent acts for is not proven", path, fix)
    try:
        req = parse(AgentRequest, dict(raw), path)
    except WireError as exc:
        raise _refuse("HATP-GW-47", f"the agent request is malformed: {exc.reason}", exc.path, fix) from exc
    if req.signature is None or canonical(req.wire()) != canonical(dict(raw)):
        raise _refuse("HATP-GW-47", "the agent request is unsigned or not in normal form", path, fix)
    return req, raw


def verify_request(
    raw: object,
    agents: AgentKeys,
    *,
    subject: str,
    subject_digest: str,
    now: datetime | None,
    max_age: timedelta = MAX_AGE,
    path: str = "$.request",
) -> str:
    """Return the person the agent acts for, proven: `raw` is the agent's AgentRequest about exactly this subject,
    signed with a key on its Directory-signed card, naming the person that card names, fresh at `now` (None: an
    offline check of a request already accepted; its age is not checked).

    Raises HatpError HATP-GW-47 (missing, malformed, unsigned, an agent without a verified card, a key not on
    its card, a forged signature) or HATP-GW-48 (another subject, another person than the card's, stale)."""
    req, doc = _parse(raw, path)
    ring = agents.keyring_for(req.agent)
    kid = req.signature.kid if req.signature else "?"
    if ring is None or kid not in ring:
        whose = "has no Directory-signed agent card here" if ring is None else f"has no key {kid!r} on its card"
        raise _refuse(
            "HATP-GW-47",
            f"{req.agent} {whose}: the request is not signed by that agent",
            f"{path}.signature.kid",
            "sign with the key the agent's Directory-signed card lists",
        )
    try:
        verify_raw(doc, ring, "agent", path)
    except SignatureError as exc:
        raise _refuse(
            "HATP-GW-47",
            f"the agent request's signature does not verify ({exc.rule}: {exc.reason})",
            exc.path,
            "sign the request again",
        ) from exc
    card = agents.card(req.agent)
    if card is None:
        raise BrokenInvariant(f"keyring_for found agent {req.agent} and its card is gone")
    if req.acts_for != card.acts_for:
        raise _refuse(
            "HATP-GW-48",
            f"{req.agent} acts for {card.acts_for} (its card), not for {req.acts_for}",
            f"{path}.actsFor",
            "an agent asks only for the person its card names",
        )
    if req.subject != subject or req.subject_digest != subject_digest:
        raise _refuse(
            "HATP-GW-48",
            f"the agent request is about {req.subject} {req.subject_digest}, not {subject} {subject_digest}",
            f"{path}.subjectDigest",
            "sign a request about exactly this call or plan",
        )
    if now is not None:
        issued = parse_ts(req.issued_at)
        if issued > now + MAX_SKEW or now - issued > max_age:
            raise _refuse(
                "HATP-GW-48",
                f"the agent request was issued at {when_words(req.issued_at, now)}; only requests from the last "
                f"{int(max_age.total_seconds())} s count",  # HATP-GW-97: the time in words, read at once
                f"{path}.issuedAt",
                "sign the request again",
            )
    return card.acts_for

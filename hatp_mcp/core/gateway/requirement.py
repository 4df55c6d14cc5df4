"""Whether an approval's human decisions meet a requirement, checked by whoever relies on the approval rather
than taken from the gateway's word: the approval gate of a tool server (hatp_mcp/core/gated_tools/checks.py) and the
coordinator (hatp_mcp/core/txn/evidence_checks.py, which the offline verifier runs too). One pure function,
`check_humans_meet`, so that the quorum, separation of duties and authority are decided in one place
(spec/gateway.md, HATP-GW-41..46).

The requirement comes from the verifier, never from the approval: the address the tool or plan requires, the
action, the amount the verifier computed itself, and the requester the verifier proved. A compromised gateway key
can sign any routing record; it cannot sign a person's decision, so everything here is decided from the people's
own proofs and the Directory-signed cards the verifier holds. Pure: no IO, no clock (`now` is passed in).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from hatp_mcp.core.gateway.address import Address, AddressError, Kind, parse_address
from hatp_mcp.core.gateway.authority import card_authority_gap
from hatp_mcp.core.gateway.proof import MAX_SKEW, HumanKeys, check_decision_proofs
from hatp_mcp.core.gateway.screen import person_words
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.when import when_words
from hatp_mcp.errors import BrokenInvariant, HatpError

__all__ = ["HumanRequirement", "check_humans_meet"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HumanRequirement:
    """What the verifier requires, from its own sources: the `address` (its `?quorum=M-of-N` is the least quorum),
    the `action`, the most that may move per currency (`up_to`, computed by the verifier from the call's arguments
    or the plan's branches) and the `requester` it proved (None: only that the approval names one is checked)."""

    address: str
    action: str | None
    up_to: Mapping[str, Decimal] = field(default_factory=dict)
    requester: str | None = None


def _refuse(rule: str, reason: str, path: str, code: str, fix: str = "") -> HatpError:
    return HatpError(rule, reason, path=path, code=code, fix=fix or "ask the Human Gateway for a new approval")


def _member(card: HumanCard, addr: Address) -> bool:
    """The card is one the address names (as the Directory resolves it: hatp_mcp/core/gateway/directory.py)."""
    if not card.id.startswith(f"human://{addr.org}/"):
        return False
    if addr.kind is Kind.PERSON:
        return card.id == addr.raw
    if addr.kind is Kind.AGENT or addr.name not in card.roles:
        return False
    return addr.skill is None or addr.skill in card.skills


def _may_decide(human: str, addr: Address, cards: Mapping[str, HumanCard]) -> bool:
    """A member of the address, or a delegate named on a member's card (the gateway asks delegates in place of a
    member, HATP-GW-10)."""
    card = cards.get(human)
    if card is not None and _member(card, addr):
        return True
    return any(human in c.delegates for c in cards.values() if _member(c, addr))


def _check_requester(approval: Approval, need: HumanRequirement, path: str) -> str:
    named = approval.routing.requester  # required on the wire: an approval without one does not parse
    if need.requester is not None and named != need.requester:
        raise _refuse(
            "HATP-GW-42",
            f"the approval names {named!r} as the requester; the proven requester is {need.requester!r}",
            f"{path}.routing.requester",
            "REQUESTER_MISMATCH",
        )
    try:
        addr = parse_address(named, f"{path}.routing.requester")
    except AddressError as exc:
        raise _refuse(
            "HATP-GW-42", f"the requester is not an address: {exc.reason}", exc.path, "REQUESTER_MISMATCH"
        ) from exc
    if addr.kind is not Kind.PERSON:
        raise _refuse(
            "HATP-GW-42",
            f"the requester {named!r} is not one person (human://ORG/NAME): an agent acts for a person",
            f"{path}.routing.requester",
            "REQUESTER_MISMATCH",
        )
    return named


def _approvers(approval: Approval, requester: str, path: str) -> list[str]:
    seen: list[str] = []
    for i, d in enumerate(approval.decisions):
        if d.decision != "approve":
            continue
        if d.approver in seen:
            raise _refuse(
                "HATP-GW-43",
                f"{d.approver} is counted twice; a quorum counts distinct people",
                f"{path}.decisions[{i}]",
                "QUORUM_NOT_MET",
            )
        if d.approver == requester:
            raise _refuse(
                "HATP-GW-42",
                f"{requester} approved their own request (separation of duties)",
                f"{path}.decisions[{i}]",
                "SEPARATION_OF_DUTIES",
            )
        seen.append(d.approver)
    return seen


def _check_quorum(approval: Approval, addr: Address, approvers: list[str], path: str) -> None:
    need = max(approval.quorum.required, addr.quorum[0] if addr.quorum else 1)
    if len(approvers) < need:
        raise _refuse(
            "HATP-GW-44",
            f"{len(approvers)} distinct approver(s), the quorum needs {need} (the larger of the approval's "
            f"{approval.quorum.required} and the address's {addr.quorum[0] if addr.quorum else 1})",
            f"{path}.quorum",
            "QUORUM_NOT_MET",
        )


def _check_fresh(
    approval: Approval, now: datetime, max_age: timedelta, path: str, names: Mapping[str, str] | None = None
) -> None:
    """HATP-GW-46: each proof issued within `max_age` before `now`, the verifier's own clock; a refusal names the
    person by their card (`names`) and the time in words, read at once (HATP-GW-97)."""
    for i, d in enumerate(approval.decisions):
        proven = d.proof or d.passkey  # an Ed25519 proof, or a passkey assertion (HATP-GW-67)
        if proven is None:
            raise BrokenInvariant(f"decision {i} has neither proof nor passkey (check_decision_proofs refuses it)")
        issued = parse_ts(proven.issued_at)
        if issued > now + MAX_SKEW or now - issued > max_age:
            raise _refuse(
                "HATP-GW-46",
                f"the proof of {person_words(d.approver, names)} was issued at {when_words(proven.issued_at, now)} "
                f"by the verifier's own clock; only proofs from the last {int(max_age.total_seconds())} s count, "
                "whatever decidedAt says",
                f"{path}.decisions[{i}].{'proof' if d.proof else 'passkey'}.issuedAt",
                "DECISION_STALE",
                "ask the people to decide again",
            )


def _check_cards(
    approval: Approval, need: HumanRequirement, addr: Address, cards: Mapping[str, HumanCard], path: str
) -> None:
    up_to = dict(need.up_to)
    for i, d in enumerate(approval.decisions):
        if d.decision != "approve":
            continue
        where = f"{path}.decisions[{i}].approver"
        card = cards.get(d.approver)
        if card is None or not _may_decide(d.approver, addr, cards):
            raise _refuse(
                "HATP-GW-45",
                f"{d.approver} is not someone {need.address!r} names (nor a delegate of one) on the cards this "
                "verifier holds",
                where,
                "NOT_AN_APPROVER",
            )
        if need.action is None:
            continue
        gap = card_authority_gap(card, need.action, up_to)
        if gap is not None:
            amounts = ", ".join(Amount.of(v, c).display() for c, v in sorted(up_to.items())) or "no amount"
            raise _refuse(
                "HATP-GW-45",
                f"{d.approver}'s card does not cover {need.action!r} for {amounts}: {gap}",
                where,
                "AUTHORITY",
                "route to people whose cards cover the amount",
            )


def check_humans_meet(
    approval: Approval,
    need: HumanRequirement,
    people: HumanKeys | None,
    *,
    now: datetime | None = None,
    max_age: timedelta | None = None,
    path: str = "$",
) -> list[str]:
    """Return the distinct approving people when the approval's decisions meet `need`; else raise the refusal.

    Checks, in this order: the approval was routed to `need.address` (HATP-GW-41); its requester (which the
    wire requires) is one person, the proven one when `need.requester` is given (HATP-GW-42); no person counts
    twice (HATP-GW-43); the requester is not among the approvers (HATP-GW-42); distinct approvers meet the
    larger of the approval's quorum and the address's (HATP-GW-44). With `people` (keys and cards from the
    Directory-verified cards): every decision carries its person's valid proof of exactly this decision on
    this approval (HATP-GW-19..27, through check_decision_proofs); with `now` and `max_age`, each proof was
    issued within `max_age` before `now`, the verifier's own clock (HATP-GW-46); and each approver is named by
    the address (or a delegate of someone it names) and holds a card whose authority for `need.action` covers
    `need.up_to` (HATP-GW-45). Without `people` none of the proof, freshness or card checks ran: the caller
    must say so, never "verified".
    """
    addr = parse_address(need.address, "requirement.address")
    if approval.routing.address != need.address:
        raise _refuse(
            "HATP-GW-41",
            f"the approval was routed to {approval.routing.address!r}; the requirement is {need.address!r}",
            f"{path}.routing.address",
            "ROUTED_ELSEWHERE",
        )
    requester = _check_requester(approval, need, path)
    approvers = _approvers(approval, requester, path)
    _check_quorum(approval, addr, approvers, path)
    if people is None:
        return approvers
    check_decision_proofs(approval, people, path)
    if now is not None and max_age is not None:
        _check_fresh(approval, now, max_age, path, people.names())
    _check_cards(approval, need, addr, people.cards, path)
    return approvers

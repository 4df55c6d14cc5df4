"""The request / result messages of the Human Gateway and the Directory as MCP servers (spec/mcp-binding.md,
"The gateway and the Directory"). Pure: no IO.

The gateway votes like a participant: `hatp/txn/prepare` takes the ordinary PrepareRequest (its `branchId` is
the approval requirement id) and answers with a VoteResult carrying the gateway's signed Vote and, once the
humans decided, the signed Approval, both as the raw JSON objects the gateway signed. `hatp/txn/voted` polls
(VotedRequest) and `hatp/txn/abort` withdraws (the ordinary AbortRequest); both answer with a VoteResult too.
`hatp/directory/resolve` takes a ResolveRequest and answers with a ResolveResult: ranked eligible people and the
excluded with rule and detail, never contact details.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import Ident, JsonObject, Timestamp, WireModel

__all__ = [
    "ASK_STATES",
    "AskWaiting",
    "AskedPerson",
    "Eligible",
    "Excluded",
    "ResolveRequest",
    "ResolveResult",
    "VoteResult",
    "VotedRequest",
]

Evidence = JsonObject
# An ask's states (core/gateway/machine.py AskState) plus `refused`: the gateway would not route the requirement.
ASK_STATES = ("pending", "approved", "rejected", "answered", "expired", "exhausted", "withdrawn", "refused")
AskStateName = Literal["pending", "approved", "rejected", "answered", "expired", "exhausted", "withdrawn", "refused"]


class VotedRequest(WireModel):
    """hatp/txn/voted: the gateway's current vote on one approval requirement of one transaction.

    `waitSeconds` makes it a long poll (HATP-MCP-40): the gateway answers as soon as its signed answer differs from
    the one it had when the request arrived (a decision, an expiry, a withdrawal, a re-signed deadline), or after
    that many seconds (it may hold for less: its own cap), whichever comes first. Absent or 0: answer at once.
    """

    type: Literal["hatp.voted"] = "hatp.voted"
    txn_id: Ident
    requirement_id: Ident
    wait_seconds: int | None = Field(default=None, ge=0, le=300)


class AskedPerson(WireModel):
    """Someone an open ask waits for, as an agent may name them to its user: the display name and roles of their
    Directory-signed card, never an address or a contact detail (HATP-MCP-54)."""

    display_name: str = Field(min_length=1, max_length=200)
    roles: list[str] = Field(default_factory=list, max_length=32)


class AskWaiting(WireModel):
    """Who an open ask waits for now and where they decide: the people asked and not yet decided, and the ask's
    page in the organisation's inbox (its `inboxUrl`), the link an agent gives its user (HATP-MCP-54)."""

    ask_id: str = Field(min_length=1, max_length=300)
    people: list[AskedPerson] = Field(default_factory=list, max_length=100)
    link: str | None = Field(default=None, max_length=2000)


class VoteResult(WireModel):
    """The gateway's answer on one requirement: its signed Vote (pending with `decideBy`, yes or no) and, once the
    humans decided (approve or reject), its signed Approval. `state` is the ask's state, for people and logs; the
    signed vote is what counts. `waiting`, while the ask is open: who must act and where (HATP-MCP-54), words
    for people that decide nothing."""

    type: Literal["hatp.vote-result"] = "hatp.vote-result"
    txn_id: Ident
    requirement_id: Ident
    state: AskStateName
    vote: Evidence
    approval: Evidence | None = None
    waiting: AskWaiting | None = None


class ResolveRequest(WireModel):
    """hatp/directory/resolve: who may decide `action` on `amounts` (the most at stake, per currency) for this
    address. `requester` is excluded (separation of duties); `decideBy` ranks those whose SLA ends in time first;
    `now` is the instant to resolve at (default: the Directory's clock)."""

    type: Literal["hatp.resolve"] = "hatp.resolve"
    address: str = Field(min_length=1, max_length=500)
    action: str | None = Field(default=None, min_length=1, max_length=200)
    amounts: list[Amount] = Field(default_factory=list, max_length=32)
    requester: str | None = Field(default=None, min_length=1, max_length=500)
    decide_by: Timestamp | None = None
    now: Timestamp | None = None


class Eligible(WireModel):
    """One person who passed every check, in rank order (rank 1 is asked first)."""

    human: str
    display_name: str
    rank: int = Field(ge=1)
    in_time: bool
    sla_seconds: int = Field(ge=0)
    availability: Literal["available", "away", "offline"]


class Excluded(WireModel):
    """One person the address names who may not decide: the reason name, its rule id and a detail."""

    human: str
    reason: str
    rule: str
    detail: str


class ResolveResult(WireModel):
    type: Literal["hatp.resolve-result"] = "hatp.resolve-result"
    address: str
    organization: str
    resolved_at: Timestamp
    eligible: list[Eligible] = Field(default_factory=list)
    excluded: list[Excluded] = Field(default_factory=list)

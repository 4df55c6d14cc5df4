"""Wire models of the Human Gateway: the Ask a person sees, the signed Answer, the approval Screen, and the
gateway's own durable record of one ask (Seat, AskRecord). Pure: no IO.

Ask and Answer leave the gateway; AskRecord never does (it is what the gateway persists), yet it too holds no
contact details: phone numbers and chat ids live in the gateway store's contacts table only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.agent import AgentRequest
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import Ident, JsonObject, SignedModel, Timestamp, WireModel
from hatp_mcp.core.model.evidence import (
    DIGEST_PATTERN,
    Checked,
    HumanDecision,
    HumanDecisionProof,
    PasskeyAssertion,
)
from hatp_mcp.core.model.terms import ApprovalTerms, HoldTerm
from hatp_mcp.core.model.toolcall import ToolCall

__all__ = [
    "MAX_TEXT_ANSWER",
    "AgentText",
    "Answer",
    "Ask",
    "AskKind",
    "AskRecord",
    "Option",
    "Screen",
    "ScreenOperation",
    "Seat",
]

AskKind = Literal["approve", "choose", "form", "text"]


# The longest text answer a question may ask for, in characters (the web inbox bounds its bodies by it).
MAX_TEXT_ANSWER = 100_000


class AgentText(WireModel):
    """Text the agent wrote. Always shown under its label, never as the gateway's own words."""

    label: Literal["agent-written"] = "agent-written"
    text: str = Field(max_length=4000)


class ScreenOperation(WireModel):
    branch_id: Ident
    participant: str
    operation: str
    tier: str
    amount: str | None = None
    up_to: str | None = None
    args: list[AgentText] = Field(default_factory=list)


class Screen(WireModel):
    """What an approver is shown, rendered from the structured plan (core/gateway/screen.py), never from agent prose."""

    title: str
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    txn_id: Ident
    requester: str
    agent: str
    action: str
    totals: list[str] = Field(default_factory=list)
    operations: list[ScreenOperation] = Field(default_factory=list)
    participants: list[str] = Field(default_factory=list)
    decide_by: Timestamp | None = None
    commit_by: Timestamp | None = None
    quorum: str | None = None
    agent_written: list[AgentText] = Field(default_factory=list)
    # holds-first: the placed holds' end times the approval relies on (hatp/txn/tighten, HATP-GW-31).
    holds: list[HoldTerm] | None = None


class Option(WireModel):
    id: Ident
    label: str = Field(min_length=1, max_length=500)


class Ask(SignedModel):
    """A question for a human: approve a plan, choose an option, fill a form, or write text."""

    type: Literal["hatp.ask"] = "hatp.ask"
    ask_id: Ident
    kind: AskKind
    txn_id: Ident | None = None
    requirement_id: Ident | None = None
    plan_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    address: str = Field(min_length=1, max_length=500)
    requester: str | None = None
    question: AgentText | None = None
    options: list[Option] = Field(default_factory=list)
    form_schema: JsonObject | None = None
    max_length: int | None = Field(default=None, ge=1, le=MAX_TEXT_ANSWER)
    screen: Screen | None = None
    decide_by: Timestamp
    gateway: str = Field(min_length=1, max_length=500)
    issued_at: Timestamp
    # Set by hatp/txn/tighten: the deadline and holds the person approves under; their proof must carry the same.
    terms: ApprovalTerms | None = None


class Answer(SignedModel):
    """The gateway's signed record of a person's answer to a choose, form or text ask.

    `subjectDigest` is the digest of the Ask (without signature): the answer is about exactly that question.
    """

    type: Literal["hatp.answer"] = "hatp.answer"
    ask_id: Ident
    kind: Literal["choose", "form", "text"]
    subject_digest: str = Field(pattern=DIGEST_PATTERN)
    txn_id: Ident | None = None
    plan_digest: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    answerer: str = Field(min_length=1, max_length=500)
    value: str | JsonObject
    answered_at: Timestamp
    gateway: str = Field(min_length=1, max_length=500)
    nonce: str = Field(min_length=16, max_length=128)
    issued_at: Timestamp
    # The answerer's own signed decision (HATP-GW-27): anyone with the cards can check that they answered this.
    proof: HumanDecisionProof | None = None
    # Or their passkey assertion over exactly this answer (HATP-GW-80), checked against the passkey on their card.
    passkey: PasskeyAssertion | None = None


class Seat(WireModel):
    """One human the address (or a delegation) matched, and where they stand.

    status: eligible (passed every check, not asked yet), asked, decided, excluded (with rule and detail).
    """

    human: str
    status: Literal["eligible", "asked", "decided", "excluded"]
    rule: str | None = None
    detail: str | None = None
    delegate_for: str | None = None
    sla_seconds: int | None = None
    asked_at: Timestamp | None = None
    due_at: Timestamp | None = None
    decision: Literal["approve", "reject", "answer", "decline"] | None = None
    decided_at: Timestamp | None = None
    via: str | None = None


class AskRecord(WireModel):
    """The gateway's durable state of one ask. Never sent; persisted by store/gateway_store.py."""

    ask: Ask
    state: str
    quorum_required: int = Field(ge=1, le=100)
    quorum_of: int = Field(ge=1, le=100)
    plan_totals: list[Amount] = Field(default_factory=list)
    up_to: list[Amount] = Field(default_factory=list)
    checked: Checked
    seats: list[Seat] = Field(default_factory=list)
    decisions: list[HumanDecision] = Field(default_factory=list)
    answer_value: str | JsonObject | None = None
    answered_by: str | None = None
    answer_proof: HumanDecisionProof | None = None
    answer_passkey: PasskeyAssertion | None = None
    closed_at: Timestamp | None = None
    code: str | None = None
    reason: str | None = None
    # A tool-call ask (core/gated_tools/gateway_routing.py): the call it is about, so the Approval can be built
    # after a restart.
    tool_call: ToolCall | None = None
    # The agent's signed request a tool-call ask was opened on (HATP-GW-49): it travels into the Approval.
    agent_request: AgentRequest | None = None

"""Signed evidence: votes, receipts, routing records and approvals. Each names the plan digest. Pure.

Who signs what (the keyring role the verifier demands): votes and receipts, the participant (or, for approval
votes, the gateway); approvals and routing records, the gateway; a HumanDecisionProof, the person themselves
(an `ed25519` key on their Directory-signed card, hatp_mcp/core/gateway/proof.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.agent import AgentRequest
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import Ident, JsonObject, SignedModel, Timestamp, WireModel
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.model.toolcall import ToolCall

__all__ = [
    "REASON_MAX",
    "Approval",
    "Checked",
    "HumanDecision",
    "HumanDecisionProof",
    "PasskeyAssertion",
    "Preconditions",
    "Quorum",
    "Receipt",
    "RecordHead",
    "RoutedHuman",
    "RoutingRecord",
    "Vote",
]

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"
# The longest reason a person may give with a reject (HATP-GW-87): a sentence or two, shown to the agent.
REASON_MAX = 500


class RecordHead(WireModel):
    """A head of a Transaction Record a party saw when it answered (spec/hatp.md HATP-REC-19): the `seq` of an
    event and the digest of that event's canonical form (signature included). One head pins the whole chain up to
    it (each event names the digest of the one before), so a record that was cut or rewritten before it no longer
    holds an event `seq` with that digest."""

    seq: int = Field(ge=0, le=1_000_000)
    # on the wire `digest` (WireModel.digest is the model's own digest)
    event_digest: str = Field(alias="digest", pattern=DIGEST_PATTERN)


class Vote(SignedModel):
    """A voter's answer at prepare: yes, no, or pending (a human still deciding, until `decideBy`)."""

    type: Literal["hatp.vote"] = "hatp.vote"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    voter: str = Field(min_length=1, max_length=500)
    decision: Literal["yes", "no", "pending"]
    code: str | None = Field(default=None, max_length=64)
    reason: str | None = Field(default=None, max_length=2000)
    decide_by: Timestamp | None = None
    # the record head the coordinator named in the request this vote answers (HATP-REC-19)
    record_head: RecordHead | None = None
    issued_at: Timestamp


class Preconditions(WireModel):
    """What a dry run saw: the version of each target and the credential scope the commit will act under."""

    versions: dict[str, str] = Field(default_factory=dict)
    credential_scope: str | None = Field(default=None, max_length=500)


class Receipt(SignedModel):
    """A participant's signed account of one phase of one branch."""

    type: Literal["hatp.receipt"] = "hatp.receipt"
    txn_id: Ident
    branch_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    participant: str = Field(min_length=1, max_length=500)
    phase: Literal["prepare", "quote", "renew", "commit", "abort", "compensate"]
    outcome: Literal["ok", "refused", "in-doubt"]
    code: str | None = Field(default=None, max_length=64)
    reason: str | None = Field(default=None, max_length=2000)
    preconditions: Preconditions | None = None
    reported_cost: Amount | None = None
    lease_expires_at: Timestamp | None = None
    hold_horizon: Timestamp | None = None
    valid_until: Timestamp | None = None
    undo_token: str | None = Field(default=None, max_length=500)
    # the record head this answer saw (HATP-REC-19): a commit's is its `decision` event, the others' the
    # coordinator's head as the request named it
    record_head: RecordHead | None = None
    issued_at: Timestamp


class Checked(WireModel):
    """What the gateway's authority check used. `absent` means no amount check ran: it never counts as a pass."""

    status: Literal["checked", "absent"]
    action: str | None = None
    amounts: list[Amount] = Field(default_factory=list)


class RoutedHuman(WireModel):
    """One human the address matched, and what happened to them."""

    human: str = Field(min_length=1, max_length=500)
    status: Literal["eligible", "asked", "decided", "excluded"]
    rule: str | None = Field(default=None, max_length=64)
    detail: str | None = Field(default=None, max_length=1000)


class RoutingRecord(WireModel):
    """How the gateway chose who decides. Travels inside every Approval, covered by its signature."""

    address: str = Field(min_length=1, max_length=500)
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    # Whom the request is for: never among the approvers. Required, so no approval can switch that check off.
    requester: str = Field(min_length=1, max_length=500)
    plan_totals: list[Amount] = Field(default_factory=list)
    up_to: list[Amount] = Field(default_factory=list)
    checked: Checked
    humans: list[RoutedHuman] = Field(default_factory=list)


class HumanDecisionProof(SignedModel):
    """A person's own signed decision on one ask (spec/gateway.md, HATP-GW-19..26): the gateway counts it only
    when it verifies against the person's card; it travels inside the Approval so anyone can check it offline.

    `subjectDigest` is what the person decided about: the plan digest (an approval of a plan), the call digest
    (an approval of a tool call) or the Ask's digest (a question, as an Answer names it)."""

    type: Literal["hatp.human-decision"] = "hatp.human-decision"
    ask_id: Ident
    subject_digest: str = Field(pattern=DIGEST_PATTERN)
    human: str = Field(min_length=1, max_length=500)
    decision: Literal["approve", "reject", "decline", "answer"]
    value: str | JsonObject | None = None
    issued_at: Timestamp
    nonce: str = Field(min_length=16, max_length=128)
    # The terms the person approved under, when the ask has them (HATP-GW-32): the same object as the Ask's.
    terms: ApprovalTerms | None = None
    # Why the person rejects (HATP-GW-87): their own words, signed here so no one else can put words in their mouth.
    reason: str | None = Field(default=None, min_length=1, max_length=REASON_MAX)


class PasskeyAssertion(WireModel):
    """A person's decision proven with a passkey (spec/gateway.md HATP-GW-67..70): the decided payload
    (`askId`, `subjectDigest`, `decision`, `nonce`, `issuedAt`, and for an answer its `value`, HATP-GW-80), whose
    SHA-256 over its canonical JSON is the WebAuthn challenge, and the authenticator's assertion over it (base64url
    members as WebAuthn sends them), made with `credentialId`, a passkey on the person's Directory-signed card."""

    type: Literal["hatp.passkey-assertion"] = "hatp.passkey-assertion"
    ask_id: Ident
    subject_digest: str = Field(pattern=DIGEST_PATTERN)
    human: str = Field(min_length=1, max_length=500)
    decision: Literal["approve", "reject", "decline", "answer"]
    # The answer to a choose / form / text ask (decision "answer"), bound into the challenge; absent otherwise.
    value: str | JsonObject | None = None
    # A reject's reason (HATP-GW-87), bound into the challenge; absent otherwise.
    reason: str | None = Field(default=None, min_length=1, max_length=REASON_MAX)
    nonce: str = Field(min_length=16, max_length=128)
    issued_at: Timestamp
    credential_id: str = Field(min_length=1, max_length=1024)
    authenticator_data: str = Field(min_length=1, max_length=4096)
    client_data_json: str = Field(alias="clientDataJSON", min_length=1, max_length=8192)
    signature: str = Field(min_length=1, max_length=1024)
    user_handle: str | None = Field(default=None, max_length=1024)


class HumanDecision(WireModel):
    approver: str = Field(min_length=1, max_length=500)
    decision: Literal["approve", "reject"]
    decided_at: Timestamp
    via: str = Field(default="inbox", max_length=64)
    # The approver's own signed decision (HATP-GW-26); an Approval's verifier checks it against the cards.
    proof: HumanDecisionProof | None = None
    # Or their passkey assertion (HATP-GW-67..70), checked against the passkey on their signed card.
    passkey: PasskeyAssertion | None = None
    # The reason the person gave with a reject, as their proof signs it (HATP-GW-87).
    reason: str | None = Field(default=None, min_length=1, max_length=REASON_MAX)


class Quorum(WireModel):
    required: int = Field(ge=1, le=100)
    of: int = Field(ge=1, le=100)


class Approval(SignedModel):
    """The gateway's signed record of a human decision over a digest (a plan's, or a tool call's)."""

    type: Literal["hatp.approval"] = "hatp.approval"
    approval_id: Ident
    subject: Literal["plan", "tool-call"] = "plan"
    txn_id: Ident | None = None
    requirement_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    decision: Literal["approve", "reject"]
    decisions: list[HumanDecision] = Field(default_factory=list)
    quorum: Quorum
    routing: RoutingRecord
    gateway: str = Field(min_length=1, max_length=500)
    nonce: str = Field(min_length=16, max_length=128)
    issued_at: Timestamp
    expires_at: Timestamp | None = None
    # subject tool-call: the call approved; planDigest is its digest (spec/gated-tools.md).
    tool_call: ToolCall | None = None
    # The terms the humans approved under (deadline, holds' end times), set by hatp/txn/tighten (HATP-GW-32).
    terms: ApprovalTerms | None = None
    # subject tool-call: the agent's own signed request, which proves whom it acts for (HATP-GW-49, HATP-GATE-26).
    request: AgentRequest | None = None

"""Agents as the protocol knows them: the Directory-signed AgentCard naming the one person an agent acts for, and
the AgentRequest the agent signs with the key on that card when it asks for an approval. Pure.

An agent's own word about whom it acts for proves nothing; the card does (spec/gateway.md section 9).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.base import SignedModel, Timestamp
from hatp_mcp.core.model.card import CardKey

__all__ = ["AgentCard", "AgentRequest"]

DIGEST_PATTERN = r"^sha256:[0-9a-f]{64}$"


class AgentCard(SignedModel):
    """``agent://acme.com/travel-bot`` acts for ``human://acme.com/dana``: signed by the organisation's Directory.
    `keys` are the agent's `ed25519` signing keys (`id` the kid its requests name, `publicKey` the JWK x)."""

    type: Literal["hatp.agent-card"] = "hatp.agent-card"
    id: str = Field(min_length=1, max_length=500)
    display_name: str = Field(min_length=1, max_length=200)
    acts_for: str = Field(min_length=1, max_length=500)
    keys: list[CardKey] = Field(default_factory=list)
    issuer: str = Field(min_length=1, max_length=500)
    issued_at: Timestamp


class AgentRequest(SignedModel):
    """The agent's signed "I ask for approval of this, for the person I act for": `subject` is what it asks about
    (a tool call, by its call digest, a plan, by its plan digest, or a question it asks people, by its question
    digest), signed with a key on its AgentCard."""

    type: Literal["hatp.agent-request"] = "hatp.agent-request"
    agent: str = Field(min_length=1, max_length=500)
    acts_for: str = Field(min_length=1, max_length=500)
    subject: Literal["tool-call", "plan", "question"]
    subject_digest: str = Field(pattern=DIGEST_PATTERN)
    issued_at: Timestamp
    nonce: str = Field(min_length=16, max_length=128)

"""The Transaction Record: a hash chain of coordinator-signed events. Pure; verification is core/txn/record.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from hatp_mcp.core.model.base import Ident, JsonObject, SignedModel, Timestamp
from hatp_mcp.core.model.evidence import DIGEST_PATTERN
from hatp_mcp.core.model.plan import Plan

__all__ = ["CLOSE_EVENT", "DECIDED_EVENT", "RecordEvent", "TransactionRecord"]

CLOSE_EVENT = "record.closed"
# The outcome can no longer change, before the record closes (spec/coordinator.md HATP-TXN-25): body
# `{"outcome": "COMMITTED", "confirming": [branchId, ...]}`, the holds still being committed.
DECIDED_EVENT = "outcome.decided"


class RecordEvent(SignedModel):
    """One event. `prev` is the digest of the previous event's canonical form (signature included), null first.

    `author` is the party the event speaks for; the event itself is signed by the coordinator that chains it,
    and `evidence`, when present, is the author's own signed object exactly as received.
    """

    type: Literal["hatp.event"] = "hatp.event"
    txn_id: Ident
    seq: int = Field(ge=0, le=1_000_000)
    prev: str | None = Field(default=None, pattern=DIGEST_PATTERN)
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    event: str = Field(min_length=1, max_length=64)
    author: str = Field(min_length=1, max_length=500)
    at: Timestamp
    body: JsonObject = Field(default_factory=dict)
    evidence: JsonObject | None = None


class TransactionRecord(SignedModel):
    """A whole record: the plan, then its events in order."""

    type: Literal["hatp.record"] = "hatp.record"
    txn_id: Ident
    plan_digest: str = Field(pattern=DIGEST_PATTERN)
    plan: Plan
    events: list[RecordEvent] = Field(default_factory=list)

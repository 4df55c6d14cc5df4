"""Every top-level wire object of HATP by its schema name: spec/schemas/ is generated from `WIRE_MODELS`
(`hatp schemas --write`), and a test fails when the committed schemas drift from the models. Importing it builds
every model, so only what needs them all imports it (the schema writer, the fuzz and wire tests).
"""

from __future__ import annotations

from hatp_mcp.core.model.agent import AgentCard, AgentRequest
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.card import HumanCard, WellKnown
from hatp_mcp.core.model.estimate import BoundsRequest, Estimate, EstimateRequest, OperationBounds, TightenRequest
from hatp_mcp.core.model.evidence import Approval, HumanDecisionProof, Receipt, RoutingRecord, Vote
from hatp_mcp.core.model.gateway import Answer, Ask
from hatp_mcp.core.model.gateway_messages import ResolveRequest, ResolveResult, VotedRequest, VoteResult
from hatp_mcp.core.model.journal_wire import (
    DeadLetter,
    JournalSagaStatus,
    PolicyStatus,
    ProxySagaStatus,
    SagaBeginRequest,
    SagaRequest,
    SagaRollbackRequest,
    ShadowEntry,
)
from hatp_mcp.core.model.messages import (
    AbortRequest,
    BranchResult,
    CommitRequest,
    CompensateRequest,
    LockAcquireRequest,
    LockReleaseRequest,
    LockRenewRequest,
    LockResult,
    PrepareRequest,
    PrepareResult,
    RenewRequest,
    StatusRequest,
    StatusResult,
)
from hatp_mcp.core.model.plan import ApprovalRequirement, Branch, Plan
from hatp_mcp.core.model.proxy_policy import ProxyPolicy
from hatp_mcp.core.model.question import QuestionQuery, QuestionRequest
from hatp_mcp.core.model.record import RecordEvent, TransactionRecord
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.model.txn_api import TxnAbortRequest, TxnList, TxnQuery, TxnStatus
from hatp_mcp.core.model.txn_auth import TxnAuth

__all__ = ["WIRE_MODELS"]

WIRE_MODELS: dict[str, type[WireModel]] = {
    "amount": Amount,
    "plan": Plan,
    "branch": Branch,
    "approval-requirement": ApprovalRequirement,
    "human-card": HumanCard,
    "agent-card": AgentCard,
    "agent-request": AgentRequest,
    "well-known": WellKnown,
    "vote": Vote,
    "receipt": Receipt,
    "routing-record": RoutingRecord,
    "approval": Approval,
    "human-decision": HumanDecisionProof,
    "record-event": RecordEvent,
    "transaction-record": TransactionRecord,
    "ask": Ask,
    "answer": Answer,
    "prepare-request": PrepareRequest,
    "prepare-result": PrepareResult,
    "commit-request": CommitRequest,
    "abort-request": AbortRequest,
    "compensate-request": CompensateRequest,
    "renew-request": RenewRequest,
    "branch-result": BranchResult,
    "status-request": StatusRequest,
    "status-result": StatusResult,
    "lock-acquire-request": LockAcquireRequest,
    "lock-renew-request": LockRenewRequest,
    "lock-release-request": LockReleaseRequest,
    "lock-result": LockResult,
    "voted-request": VotedRequest,
    "vote-result": VoteResult,
    "resolve-request": ResolveRequest,
    "resolve-result": ResolveResult,
    "txn-query": TxnQuery,
    "txn-abort-request": TxnAbortRequest,
    "txn-status": TxnStatus,
    "txn-list": TxnList,
    "approval-terms": ApprovalTerms,
    "estimate-request": EstimateRequest,
    "estimate": Estimate,
    "tighten-request": TightenRequest,
    "bounds-request": BoundsRequest,
    "operation-bounds": OperationBounds,
    "txn-auth": TxnAuth,
    "question-request": QuestionRequest,
    "question-query": QuestionQuery,
    "proxy-policy": ProxyPolicy,
    "saga-begin-request": SagaBeginRequest,
    "saga-request": SagaRequest,
    "saga-rollback-request": SagaRollbackRequest,
    "proxy-saga-status": ProxySagaStatus,
    "journal-saga-status": JournalSagaStatus,
    "dead-letter": DeadLetter,
    "shadow-entry": ShadowEntry,
    "policy-status": PolicyStatus,
}

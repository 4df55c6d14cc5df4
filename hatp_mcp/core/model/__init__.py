"""The typed wire objects of HATP (pydantic v2, camelCase on the wire, strict). Pure: no IO. Of the core, imports
signing only.

`WIRE_MODELS` lists every top-level wire object; spec/schemas/ is generated from it (`hatp schemas --write`)
and a test fails when the committed schemas drift from the models.

- base.py: the base of every wire model (camelCase, strict, unknown members refused) and the shared field types;
- wire.py: untrusted bytes turned into wire objects, with one-line errors naming the source and the JSON path;
- amount.py: money as exact decimal strings with an ISO 4217 currency; never floats, never converted;
- currency.py: the ISO 4217 codes an amount may be in; any other code is refused before anyone is asked;
- money.py: what a plan moves, per currency: the one computation the validator, gateway and approvers share;
- plan.py: the Plan, one all-or-nothing transaction, and its Branches; all evidence names its digest;
- example_plan.py: the example plan, a trip in the acme.com test organisation, its times made from `now`;
- evidence.py: signed evidence: votes, receipts, routing records and approvals, each naming the plan digest;
- record.py: the Transaction Record, a hash chain of coordinator-signed events;
- messages.py: the request / result messages between a coordinator and a participant (hatp/txn/*, hatp/lock/*);
- txn_api.py: the wire objects an agent exchanges with a coordinator: begin, status, abort, the pending list;
- txn_auth.py: the coordinator's signed authorization of one state-changing request (`auth` in the params);
- estimate.py: the wire objects of `hatp/txn/estimate` and `hatp/txn/tighten`;
- terms.py: the terms a person approves under: the approval deadline and the holds' end times;
- card.py: Human Cards, who a person is to the protocol, signed by their Directory; no contact details;
- agent.py: the agent card naming the person an agent acts for, and the request the agent signs;
- gateway.py: the Human Gateway's models: the Ask, the signed Answer, the Screen, and its durable AskRecord;
- gateway_messages.py: the request / result messages of the Human Gateway and the Directory as MCP servers;
- question.py: a question an agent asks people over MCP (`hatp/ask/{choose,form,text}`);
- proxy_policy.py: the proxy's policy file: its upstream, that server's environment, a policy per tool;
- journal_wire.py: what the journal and the proxy answer: saga statuses, dead letters, shadow and policy status;
- toolcall.py: the subject of a tool-call approval: server, tool, arguments by digest, most paid and to whom;
- when.py: times as a person reads them, with a countdown where read at once (HATP-GW-88, 97).
"""

from __future__ import annotations

from hatp_mcp.core.model.agent import AgentCard, AgentRequest
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import Signature, SignedModel, WireModel, format_ts, parse_ts
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

__all__ = [
    "WIRE_MODELS",
    "AgentCard",
    "AgentRequest",
    "Amount",
    "Answer",
    "Approval",
    "ApprovalRequirement",
    "Ask",
    "Branch",
    "HumanCard",
    "HumanDecisionProof",
    "Plan",
    "ProxyPolicy",
    "Receipt",
    "RecordEvent",
    "RoutingRecord",
    "Signature",
    "SignedModel",
    "TransactionRecord",
    "TxnAuth",
    "Vote",
    "WellKnown",
    "WireModel",
    "format_ts",
    "parse_ts",
]

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

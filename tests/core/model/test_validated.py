"""Which wire objects validation made, and that each marked model holds what validation makes of its wire form:
validating a marked object's wire form again gives an equal object in the same canonical bytes, which is what
lets a verifier handed one skip that validation (hatp_mcp/core/gateway/proof.py, agents.py). Generated objects,
near the edges of each field (lengths, timestamps with fractions, free JSON values with floats and nesting)."""

from __future__ import annotations

import copy
import gc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.model.agent import AgentRequest
from hatp_mcp.core.model.evidence import Approval, HumanDecisionProof
from hatp_mcp.core.model.validated import _MADE, was_validated
from hatp_mcp.core.signing.canonical import CanonicalError, canonical
from tests.acme_org import agent_request

DIGEST = "sha256:" + "ab" * 32
ident = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}\Z")
text = st.text(min_size=1, max_size=40)
timestamp = st.builds(
    lambda d, frac: f"2026-{d % 12 + 1:02d}-{d % 28 + 1:02d}T{d % 24:02d}:{d % 60:02d}:{d % 59:02d}{frac}Z",
    st.integers(0, 10_000),
    st.sampled_from(["", ".5", ".123456", ".000001"]),
)
nonce = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=16, max_size=128)
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_value = st.recursive(
    json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
)
signature = st.none() | st.fixed_dictionaries({"alg": st.sampled_from(["EdDSA", "x"]), "kid": text, "sig": text})
hold = st.fixed_dictionaries(
    {"branchId": ident, "leaseExpiresAt": timestamp}, optional={"holdHorizon": timestamp | st.none()}
)
terms = st.none() | st.fixed_dictionaries({"decideBy": timestamp}, optional={"holds": st.lists(hold, max_size=2)})
proof_doc = st.fixed_dictionaries(
    {
        "askId": ident,
        "subjectDigest": st.just(DIGEST),
        "human": text,
        "decision": st.sampled_from(["approve", "reject", "decline", "answer"]),
        "issuedAt": timestamp,
        "nonce": nonce,
    },
    optional={
        "type": st.just("hatp.human-decision"),
        "value": st.none() | st.text(max_size=20) | st.dictionaries(st.text(max_size=6), json_value, max_size=3),
        "terms": terms,
        "signature": signature,
    },
)
request_doc = st.fixed_dictionaries(
    {
        "agent": text,
        "actsFor": text,
        "subject": st.sampled_from(["tool-call", "plan", "question"]),
        "subjectDigest": st.just(DIGEST),
        "issuedAt": timestamp,
        "nonce": nonce,
    },
    optional={"type": st.just("hatp.agent-request"), "signature": signature},
)


def _round_trips(model: type[HumanDecisionProof] | type[AgentRequest], doc: dict[str, Any]) -> None:
    try:
        made = model.model_validate(doc)
    except ValueError:
        return  # refused by the schema: nothing made, nothing marked
    assert was_validated(made)
    again = model.model_validate(made.wire())
    assert again == made
    assert again.wire() == made.wire()
    assert _canonical(again.wire()) == _canonical(made.wire())


def _canonical(value: Any) -> bytes | tuple[str, str, str]:
    """The canonical bytes, or the refusal (rule, path, reason) when there are none (a float, say)."""
    try:
        return canonical(value)
    except CanonicalError as exc:
        return (exc.rule, exc.path, exc.reason)


@settings(max_examples=400, deadline=None)
@given(doc=proof_doc)
def test_a_validated_decision_proof_is_what_validating_its_wire_form_again_makes(doc: dict[str, Any]) -> None:
    _round_trips(HumanDecisionProof, doc)


@settings(max_examples=300, deadline=None)
@given(doc=request_doc)
def test_a_validated_agent_request_is_what_validating_its_wire_form_again_makes(doc: dict[str, Any]) -> None:
    _round_trips(AgentRequest, doc)


def test_only_objects_validation_made_are_marked_never_copies_or_constructed_ones() -> None:
    req = AgentRequest.model_validate(agent_request(DIGEST, _now()))
    assert was_validated(req)
    assert not was_validated(req.model_copy())
    assert not was_validated(req.model_copy(update={"nonce": "short"}))
    assert not was_validated(copy.deepcopy(req))
    assert not was_validated(AgentRequest.model_construct(**dict(req)))
    assert AgentRequest.model_validate(req) is req  # handed the object itself: nothing new is made or marked


def test_objects_inside_a_parsed_approval_are_marked_and_a_mark_dies_with_its_object() -> None:
    from tests.mcp.test_gated_tools import ARGS, approve  # the gate's own approvals, fresh

    tool_call = {"server": "mcp://payments.example", "tool": "charge_card", "argumentsDigest": DIGEST}
    approval = Approval.model_validate(approve(tool_call, _now(), args=ARGS))
    assert approval.request is not None and was_validated(approval.request)
    assert all(d.proof is not None and was_validated(d.proof) for d in approval.decisions)
    key = id(approval.request)
    del approval
    gc.collect()
    assert key not in _MADE or _MADE[key]() is not None  # gone, or another live object's mark under that id


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

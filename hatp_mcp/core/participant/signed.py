"""A participant's signed votes and receipts, built as wire dicts without building a model first.

`signed_vote(key, **fields)` is `sign_object(Vote(**fields).wire(), key)` and `signed_receipt(key, **fields)` is
`sign_object(Receipt(**fields).wire(), key)`: the same members in the same order, so the same canonical bytes and
the same (deterministic, Ed25519) signature. The dict is written directly only when every argument is one the
model would take as it is: exact types, every bounded string within its bounds, identifiers, digests and timestamps
matching their patterns, sub-objects of their exact model types (RecordHead, Preconditions, Amount). Anything else
goes through the model, which refuses it (pydantic ValidationError) or normalizes it exactly as before; so the
answer on any input is the model path's. tests/core/participant/test_signed.py holds the two paths equal on
generated inputs, valid and not. Pure: no IO.
"""

from __future__ import annotations

import re
from typing import Any

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.evidence import DIGEST_PATTERN, Preconditions, Receipt, RecordHead, Vote
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.core.signing.keys import ALG, SigningKey, sign_object

__all__ = ["signed_receipt", "signed_vote"]

# Ident's pattern (hatp_mcp.core.model.base; a test holds the two equal) and the bounds of Vote's and Receipt's fields
_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,127}$")
_DIGEST = re.compile(DIGEST_PATTERN)
_DECISIONS = frozenset({"yes", "no", "pending"})
_PHASES = frozenset({"prepare", "quote", "renew", "commit", "abort", "compensate"})
_OUTCOMES = frozenset({"ok", "refused", "in-doubt"})


def _text(value: object, most: int, least: int = 0) -> bool:
    return type(value) is str and least <= len(value) <= most


def _opt_text(value: object, most: int) -> bool:
    return value is None or _text(value, most)


def _ts(value: object) -> bool:
    if type(value) is not str:
        return False
    try:
        parse_ts(value)  # Timestamp's own check: the pattern, and a date that exists
    except ValueError:
        return False
    return True


def _opt_ts(value: object) -> bool:
    return value is None or _ts(value)


def _subject(txn_id: object, branch_id: object, plan_digest: object) -> bool:
    return (
        type(txn_id) is str
        and _IDENT.fullmatch(txn_id) is not None
        and type(branch_id) is str
        and _IDENT.fullmatch(branch_id) is not None
        and type(plan_digest) is str
        and _DIGEST.fullmatch(plan_digest) is not None
    )


def _head(head: object) -> dict[str, Any] | None:
    """RecordHead's wire form, or None when it is not a plain RecordHead (the model path decides)."""
    if type(head) is not RecordHead:
        return None
    seq, found = head.seq, head.event_digest  # a frozen model: validated when made, never changed
    if type(seq) is not int or type(found) is not str:
        return None
    return {"seq": seq, "digest": found}


def _preconditions(pre: object) -> dict[str, Any] | None:
    """Preconditions' wire form, or None when it is not a plain Preconditions holding strings only. (Its
    `versions` dict is mutable, so it is looked at now, as the model's dump would.)"""
    if type(pre) is not Preconditions:
        return None
    versions, scope = pre.versions, pre.credential_scope
    if type(versions) is not dict or not all(type(k) is str and type(v) is str for k, v in versions.items()):
        return None
    if scope is not None and type(scope) is not str:
        return None
    out: dict[str, Any] = {"versions": dict(versions)}
    if scope is not None:
        out["credentialScope"] = scope
    return out


def _amount(cost: object) -> dict[str, Any] | None:
    if type(cost) is not Amount:
        return None
    value, currency = cost.value, cost.currency
    if type(value) is not str or type(currency) is not str:
        return None
    return {"value": value, "currency": currency}


def _sign(
    wire: dict[str, Any], optional: tuple[tuple[str, Any], ...], issued_at: str, key: SigningKey
) -> dict[str, Any]:
    """The rest of the wire dict in the model's member order (the `optional` members that are set, then `issuedAt`),
    then `sign_object(wire, key)` on it (no `signature` member yet), signed in place: no copies."""
    for name, value in optional:
        if value is not None:
            wire[name] = value
    wire["issuedAt"] = issued_at
    wire["signature"] = {"alg": ALG, "kid": key.kid, "sig": key.sign(canonical(wire))}
    return wire


def signed_vote(
    key: SigningKey,
    *,
    txn_id: str,
    branch_id: str,
    plan_digest: str,
    voter: str,
    decision: str,
    issued_at: str,
    code: str | None = None,
    reason: str | None = None,
    decide_by: str | None = None,
    record_head: RecordHead | None = None,
) -> dict[str, Any]:
    """`sign_object(Vote(...).wire(), key)`. Raises pydantic.ValidationError where Vote does."""
    head = _head(record_head) if record_head is not None else None
    if (
        _subject(txn_id, branch_id, plan_digest)
        and _text(voter, 500, 1)
        and type(decision) is str
        and decision in _DECISIONS
        and _opt_text(code, 64)
        and _opt_text(reason, 2000)
        and _opt_ts(decide_by)
        and (record_head is None or head is not None)
        and _ts(issued_at)
    ):
        wire: dict[str, Any] = {
            "type": "hatp.vote",
            "txnId": txn_id,
            "branchId": branch_id,
            "planDigest": plan_digest,
            "voter": voter,
            "decision": decision,
        }
        optional = (("code", code), ("reason", reason), ("decideBy", decide_by), ("recordHead", head))
        return _sign(wire, optional, issued_at, key)
    vote = Vote(
        txn_id=txn_id,
        branch_id=branch_id,
        plan_digest=plan_digest,
        voter=voter,
        decision=decision,  # type: ignore[arg-type]
        code=code,
        reason=reason,
        decide_by=decide_by,
        record_head=record_head,
        issued_at=issued_at,
    )
    return sign_object(vote.wire(), key)


def signed_receipt(
    key: SigningKey,
    *,
    txn_id: str,
    branch_id: str,
    plan_digest: str,
    participant: str,
    phase: str,
    outcome: str,
    issued_at: str,
    code: str | None = None,
    reason: str | None = None,
    preconditions: Preconditions | None = None,
    reported_cost: Amount | None = None,
    lease_expires_at: str | None = None,
    hold_horizon: str | None = None,
    valid_until: str | None = None,
    undo_token: str | None = None,
    record_head: RecordHead | None = None,
) -> dict[str, Any]:
    """`sign_object(Receipt(...).wire(), key)`. Raises pydantic.ValidationError where Receipt does."""
    pre = _preconditions(preconditions) if preconditions is not None else None
    cost = _amount(reported_cost) if reported_cost is not None else None
    head = _head(record_head) if record_head is not None else None
    if (
        _subject(txn_id, branch_id, plan_digest)
        and _text(participant, 500, 1)
        and type(phase) is str
        and phase in _PHASES
        and type(outcome) is str
        and outcome in _OUTCOMES
        and _opt_text(code, 64)
        and _opt_text(reason, 2000)
        and (preconditions is None or pre is not None)
        and (reported_cost is None or cost is not None)
        and _opt_ts(lease_expires_at)
        and _opt_ts(hold_horizon)
        and _opt_ts(valid_until)
        and _opt_text(undo_token, 500)
        and (record_head is None or head is not None)
        and _ts(issued_at)
    ):
        wire: dict[str, Any] = {
            "type": "hatp.receipt",
            "txnId": txn_id,
            "branchId": branch_id,
            "planDigest": plan_digest,
            "participant": participant,
            "phase": phase,
            "outcome": outcome,
        }
        optional = (
            ("code", code),
            ("reason", reason),
            ("preconditions", pre),
            ("reportedCost", cost),
            ("leaseExpiresAt", lease_expires_at),
            ("holdHorizon", hold_horizon),
            ("validUntil", valid_until),
            ("undoToken", undo_token),
            ("recordHead", head),
        )
        return _sign(wire, optional, issued_at, key)
    receipt = Receipt(
        txn_id=txn_id,
        branch_id=branch_id,
        plan_digest=plan_digest,
        participant=participant,
        phase=phase,  # type: ignore[arg-type]
        outcome=outcome,  # type: ignore[arg-type]
        code=code,
        reason=reason,
        preconditions=preconditions,
        reported_cost=reported_cost,
        lease_expires_at=lease_expires_at,
        hold_horizon=hold_horizon,
        valid_until=valid_until,
        undo_token=undo_token,
        record_head=record_head,
        issued_at=issued_at,
    )
    return sign_object(receipt.wire(), key)

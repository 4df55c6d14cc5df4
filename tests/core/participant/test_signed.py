"""The participant's signed votes and receipts built directly (hatp_mcp/core/participant/signed.py) are the model
path's, `sign_object(Vote(...).wire(), key)` / `sign_object(Receipt(...).wire(), key)`, on every input: the same
dict, member order, canonical bytes and signature where the model accepts the input, the same ValidationError where
it refuses it."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hatp_mcp.core.model import base
from hatp_mcp.core.model import evidence as model
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Preconditions, Receipt, RecordHead, Vote
from hatp_mcp.core.participant import signed
from hatp_mcp.core.participant.signed import signed_receipt, signed_vote
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object, verify_object

KEY = SigningKey.generate(["participant"], kid="p-1")
DIGEST = "sha256:" + "ab" * 32


def _model_vote(key: SigningKey, **fields: Any) -> dict[str, Any]:
    return sign_object(Vote(**fields).wire(), key)


def _model_receipt(key: SigningKey, **fields: Any) -> dict[str, Any]:
    return sign_object(Receipt(**fields).wire(), key)


def _answer(fn: Callable[..., dict[str, Any]], fields: dict[str, Any]) -> tuple[Any, ...]:
    """What a path gives: the dict, its members in order and its canonical bytes, or the refusal."""
    try:
        out = fn(KEY, **fields)
    except ValidationError as exc:
        return ("refused", repr(exc.errors(include_url=False)))
    return ("signed", out, json.dumps(out), canonical(out))  # json.dumps keeps every member's order, nested too


def _same(
    direct: Callable[..., dict[str, Any]], by_model: Callable[..., dict[str, Any]], fields: dict[str, Any]
) -> tuple[Any, ...]:
    got, want = _answer(direct, fields), _answer(by_model, fields)
    assert got == want
    return got


# Each field: values the model takes as they are, and values it refuses (or would take only by converting them)
_IDENT_OK = st.one_of(
    st.sampled_from(["txn-1", "b1", "a" * 128, "A.b_c:d@e/f+g-h"]), st.from_regex(base._IDENT, fullmatch=True)
)
_IDENT_BAD = st.one_of(st.sampled_from(["", "-x", "a" * 129, "a b", "é"]), st.integers(0, 3), st.none())
_TEXT_BAD = st.one_of(st.just(5), st.just(b"x"))
_TS_OK = st.one_of(
    st.sampled_from(["2026-11-29T10:00:00Z", "2026-11-29T10:00:00.123Z", "0001-01-01T00:00:00.000001Z"]),
    st.datetimes(timezones=st.just(UTC)).map(format_ts),
)
_TS_BAD = st.sampled_from(
    ["2026-13-29T10:00:00Z", "2026-11-29T10:00:00.1234567Z", "2026-11-29 10:00:00Z", "2026-11-29T10:00:00+00:00", "", 1]
)
_HEAD_OK = st.integers(0, 1_000_000).map(lambda seq: RecordHead(seq=seq, event_digest=DIGEST))
_HEAD_BAD = st.sampled_from(
    [RecordHead.model_construct(seq=True, event_digest=DIGEST), {"seq": 1, "digest": DIGEST}, 7]  # never validated
)
_versions = st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)
_PRE_OK = st.tuples(_versions, st.one_of(st.none(), st.text(max_size=8))).map(
    lambda v: Preconditions(versions=v[0], credential_scope=v[1])
)
_NOT_STR: Any = 1  # what a model made without validation may hold
_PRE_BAD = st.sampled_from(
    [Preconditions.model_construct(versions={"a": _NOT_STR}, credential_scope=None), {"versions": {}}]
)
_COST_OK = st.tuples(st.sampled_from(["600.00", "0", "12", "-3.5"]), st.sampled_from(["USD", "EUR"])).map(
    lambda v: Amount.of(*v)
)
_COST_BAD = st.sampled_from([Amount.model_construct(value=_NOT_STR, currency="USD"), {"value": "1", "currency": "USD"}])


def _bounded(most: int, least: int = 0) -> tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]:
    ok = st.one_of(st.text(min_size=least, max_size=min(most, 20)), st.just("c" * most))
    return ok, st.one_of(st.just("c" * (most + 1)), _TEXT_BAD, *([st.just("")] if least else []))


def _optional(pair: tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]) -> tuple[Any, Any]:
    return st.one_of(st.none(), pair[0]), pair[1]


_COMMON: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    "txn_id": (_IDENT_OK, _IDENT_BAD),
    "branch_id": (_IDENT_OK, _IDENT_BAD),
    "plan_digest": (
        st.sampled_from([DIGEST, "sha256:" + "0" * 64]),
        st.sampled_from(["sha256:" + "AB" * 32, "", None, 7]),
    ),
    "code": _optional(_bounded(64)),
    "reason": _optional(_bounded(2000)),
    "record_head": _optional((_HEAD_OK, _HEAD_BAD)),
    "issued_at": (_TS_OK, _TS_BAD),
}
VOTE = _COMMON | {
    "voter": _bounded(500, 1),
    "decision": (st.sampled_from(["yes", "no", "pending"]), st.sampled_from(["maybe", None, "YES"])),
    "decide_by": _optional((_TS_OK, _TS_BAD)),
}
RECEIPT = _COMMON | {
    "participant": _bounded(500, 1),
    "phase": (
        st.sampled_from(["prepare", "quote", "renew", "commit", "abort", "compensate"]),
        st.sampled_from(["undo", None]),
    ),
    "outcome": (st.sampled_from(["ok", "refused", "in-doubt"]), st.sampled_from(["maybe", None])),
    "preconditions": _optional((_PRE_OK, _PRE_BAD)),
    "reported_cost": _optional((_COST_OK, _COST_BAD)),
    "lease_expires_at": _optional((_TS_OK, _TS_BAD)),
    "hold_horizon": _optional((_TS_OK, _TS_BAD)),
    "valid_until": _optional((_TS_OK, _TS_BAD)),
    "undo_token": _optional(_bounded(500)),
}


@st.composite
def _fields(draw: st.DrawFn, spec: dict[str, tuple[Any, Any]], broken: int) -> dict[str, Any]:
    """Every field valid except up to `broken` of them (0: all valid, so the direct path runs)."""
    bad = draw(st.sets(st.sampled_from(sorted(spec)), max_size=broken))
    return {name: draw(pair[1] if name in bad else pair[0]) for name, pair in spec.items()}


@settings(max_examples=200, deadline=None)
@given(fields=_fields(VOTE, 0))
def test_a_valid_vote_built_directly_is_the_models(fields: dict[str, Any]) -> None:
    assert _same(signed_vote, _model_vote, fields)[0] == "signed"


@settings(max_examples=200, deadline=None)
@given(fields=_fields(VOTE, 2))
def test_a_vote_built_directly_is_the_models_on_inputs_it_refuses_too(fields: dict[str, Any]) -> None:
    _same(signed_vote, _model_vote, fields)


@settings(max_examples=200, deadline=None)
@given(fields=_fields(RECEIPT, 0))
def test_a_valid_receipt_built_directly_is_the_models(fields: dict[str, Any]) -> None:
    assert _same(signed_receipt, _model_receipt, fields)[0] == "signed"


@settings(max_examples=200, deadline=None)
@given(fields=_fields(RECEIPT, 2))
def test_a_receipt_built_directly_is_the_models_on_inputs_it_refuses_too(fields: dict[str, Any]) -> None:
    _same(signed_receipt, _model_receipt, fields)


def _valid_receipt() -> dict[str, Any]:
    return {
        "txn_id": "txn-1",
        "branch_id": "b1",
        "plan_digest": DIGEST,
        "participant": "mcp://airline",
        "phase": "prepare",
        "outcome": "ok",
        "preconditions": Preconditions(versions={"seat-12A": "v3"}, credential_scope="booking"),
        "reported_cost": Amount.of("600.00", "USD"),
        "lease_expires_at": "2026-11-29T10:15:00Z",
        "hold_horizon": "2026-11-30T10:00:00Z",
        "record_head": RecordHead(seq=4, event_digest=DIGEST),
        "issued_at": "2026-11-29T10:00:00.25Z",
    }


def test_what_the_runtime_signs_is_built_without_a_model_and_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    by_model = _answer(_model_receipt, _valid_receipt())
    vote_fields = {k: v for k, v in _valid_receipt().items() if k in {"txn_id", "branch_id", "plan_digest"}}
    vote_fields |= {"voter": "mcp://airline", "decision": "yes", "issued_at": "2026-11-29T10:00:00Z"}
    vote_by_model = _answer(_model_vote, vote_fields)

    def no_model(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the direct path built a model")

    monkeypatch.setattr(signed, "Receipt", no_model)
    monkeypatch.setattr(signed, "Vote", no_model)
    assert _answer(signed_receipt, _valid_receipt()) == by_model  # the fast path, the same answer
    assert _answer(signed_vote, vote_fields) == vote_by_model
    ring = Keyring()
    ring.add_signer(KEY)
    assert verify_object(signed_receipt(KEY, **_valid_receipt()), ring, "participant") == KEY.kid


def test_the_ident_and_digest_patterns_are_the_models_own() -> None:
    assert signed._IDENT.pattern == base._IDENT.pattern
    assert signed._DIGEST.pattern == model.DIGEST_PATTERN

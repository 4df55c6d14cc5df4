"""Acting only for a trusted coordinator: the checks a receiver (participant or Human Gateway) runs on the
coordinator's signed authorization of a state-changing request, and how a coordinator makes one.

A request's params carry `auth`, a TxnAuth (hatp_mcp/core/model/txn_auth.py) signed by the coordinator over the
digest of the params without `auth`; a commit also carries the coordinator-signed `decision` record event.
`check_auth` proves the request came from a coordinator of the receiver's trust list and names exactly this
request, fresh; `check_binding` keeps a transaction with the first coordinator and plan that touched it. The
rules are spec/mcp-binding.md HATP-TRUST-1..12. Pure: no IO, no clock (callers pass `now`); deciding whether to
keep a binding is the caller's (hatp_mcp/runtime/coordinator_trust.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.txn_auth import AUTH_METHODS, TxnAuth
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.model.wire import WireError, parse
from hatp_mcp.core.signing.canonical import CanonicalError, digest
from hatp_mcp.core.signing.keys import Keyring, SignatureError, SigningKey, check_party, sign_object, verify_object
from hatp_mcp.errors import BrokenInvariant, HatpError

__all__ = [
    "CLOCK_SKEW",
    "MAX_LIFETIME",
    "Admitted",
    "Binding",
    "authorize",
    "check_auth",
    "check_binding",
    "check_decision",
    "check_epoch",
    "check_vote",
    "no_trusted_coordinator",
    "request_digest",
]

MAX_LIFETIME = timedelta(seconds=300)  # an auth may be valid for at most this long (HATP-TRUST-4)
CLOCK_SKEW = timedelta(seconds=60)  # how far in the future an issuedAt may lie (the coordinator's clock runs ahead)
DEFAULT_LIFETIME = timedelta(seconds=120)
_FIX = "send the request through a coordinator this server trusts (it signs `auth` for every request)"


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request proven to come from `coordinator` (signed with key `kid`) about (txnId, branchId, planDigest)."""

    coordinator: str
    kid: str
    txn_id: str
    branch_id: str
    plan_digest: str
    epoch: int = 0  # the coordinator's fencing epoch (HATP-TRUST-9); an auth naming none is epoch 0


@dataclass(frozen=True, slots=True)
class Binding:
    """The coordinator and the plan a receiver keeps a transaction with (HATP-TRUST-5)."""

    txn_id: str
    coordinator: str
    plan_digest: str


def request_digest(params: Mapping[str, Any]) -> str:
    """The digest an auth covers: the canonical params without their `auth` member. Raises CanonicalError."""
    return digest({k: v for k, v in params.items() if k != "auth"})


def _subject(params: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """(txnId, branchId or requirementId, planDigest) as the params name them."""
    branch = params.get("branchId", params.get("requirementId"))
    return params.get("txnId"), branch, params.get("planDigest")


def authorize(
    method: str,
    params: Mapping[str, Any],
    key: SigningKey,
    coordinator: str,
    now: datetime,
    lifetime: timedelta = DEFAULT_LIFETIME,
    epoch: int | None = None,
) -> dict[str, Any]:
    """The coordinator's side (HATP-TRUST-11): `params` with `auth` set, signed by `key` for `method`; `epoch`: the
    coordinator's lease epoch for the transaction (HATP-TRUST-9), None for a coordinator without leases.

    Raises ValueError for a method that needs no auth or params that name no txnId/branch/planDigest."""
    if method not in AUTH_METHODS:
        raise ValueError(f"{method!r} is not a state-changing method ({sorted(AUTH_METHODS)})")
    txn_id, branch_id, plan_digest = _subject(params)
    if not all(isinstance(v, str) for v in (txn_id, branch_id, plan_digest)):
        raise ValueError("params must name txnId, branchId (or requirementId) and planDigest")
    body = {k: v for k, v in params.items() if k != "auth"}
    auth = TxnAuth(
        method=method,  # type: ignore[arg-type]
        txn_id=txn_id,
        branch_id=branch_id,
        plan_digest=plan_digest,
        coordinator=coordinator,
        request_digest=digest(body),
        issued_at=format_ts(now),
        expires_at=format_ts(now + min(lifetime, MAX_LIFETIME)),
        epoch=epoch,
    )
    return {**body, "auth": sign_object(auth.wire(), key)}


def no_trusted_coordinator(where: str) -> HatpError:
    """HATP-TRUST-6: this receiver trusts no coordinator, so it refuses every state-changing request."""
    return HatpError(
        "HATP-TRUST-6",
        "this server trusts no coordinator, so it refuses every request that changes state",
        path="$.auth",
        code="NO_TRUSTED_COORDINATOR",
        fix=f"restart it with --trusted-coordinators FILE (a JWKS of coordinator public keys, each with role "
        f"'coordinator' and the 'party' it speaks for), or put that file at {where}",
    )


def _unproven(rule: str, reason: str, path: str = "$.auth") -> HatpError:
    return HatpError(rule, reason, path=path, code="COORDINATOR_UNPROVEN", fix=_FIX)


def _mismatch(name: str, got: object, want: object, path: str) -> HatpError:
    return HatpError(
        "HATP-TRUST-3",
        f"the auth names {name} {got!r}, but the request is {want!r}",
        path=path,
        code="AUTH_MISMATCH",
        fix="sign a fresh auth for exactly this request",
    )


def check_auth(method: str, params: Mapping[str, Any], trusted: Keyring | None, now: datetime) -> Admitted:
    """HATP-TRUST-1..4, 9: the request is `method`, authorized by a coordinator of `trusted`, for exactly these
    params, now. `trusted` None: no trust list is configured (HATP-TRUST-6).

    Raises HatpError HATP-TRUST-6 (NO_TRUSTED_COORDINATOR), -1/-2 (COORDINATOR_UNPROVEN), -3 (AUTH_MISMATCH),
    -4 (AUTH_EXPIRED). The epoch is compared with the receiver's highest by `check_epoch`."""
    if trusted is None or len(trusted) == 0:
        raise no_trusted_coordinator("DATA/trusted-coordinators.json")
    raw = params.get("auth")
    if not isinstance(raw, Mapping):
        raise _unproven("HATP-TRUST-1", f"a {method} request must carry `auth`, its coordinator's signed TxnAuth")
    try:
        auth = parse(TxnAuth, dict(raw), "$.auth")
    except WireError as exc:
        raise _unproven("HATP-TRUST-1", f"`auth` is not a TxnAuth: {exc.reason}", exc.path) from exc
    try:
        kid = verify_object(raw, trusted, "coordinator", "$.auth")
        entry = trusted.get(kid)
        if entry is None:
            raise BrokenInvariant(f"verify_object found key {kid} and the trust list no longer has it")
        check_party(entry, auth.coordinator, "$.auth.coordinator", required=True)
    except SignatureError as exc:
        raise _unproven("HATP-TRUST-2", f"{exc.rule}: {exc.reason}", exc.path) from exc
    txn_id, branch_id, plan_digest = _subject(params)
    for name, got, want in (
        ("method", auth.method, method),
        ("txnId", auth.txn_id, txn_id),
        ("branchId", auth.branch_id, branch_id),
        ("planDigest", auth.plan_digest, plan_digest),
    ):
        if got != want:
            raise _mismatch(name, got, want, f"$.auth.{name}")
    if "coordinator" in params and params["coordinator"] != auth.coordinator:
        raise _mismatch("coordinator", auth.coordinator, params["coordinator"], "$.auth.coordinator")
    try:
        actual = request_digest(params)
    except CanonicalError as exc:
        raise HatpError(exc.rule, exc.reason, path="$", code="AUTH_MISMATCH") from exc
    if auth.request_digest != actual:
        raise _mismatch("requestDigest", auth.request_digest, actual, "$.auth.requestDigest")
    issued, expires = parse_ts(auth.issued_at), parse_ts(auth.expires_at)
    if expires - issued > MAX_LIFETIME or expires <= issued:
        raise _expired(  # HATP-GW-97: times in words, a refusal read at once
            f"an auth lives at most {int(MAX_LIFETIME.total_seconds())}s; this one"
            f" {int((expires - issued).total_seconds())}s, from {when_words(auth.issued_at, now)}"
            f" to {when_words(auth.expires_at, now)}"
        )
    if issued > now + CLOCK_SKEW:
        raise _expired(
            f"the auth is issued at {when_words(auth.issued_at, now)}, ahead of this receiver's clock by more than"
            f" the {int(CLOCK_SKEW.total_seconds())}s allowed"
        )
    if now >= expires:
        raise _expired(f"the auth expired at {when_words(auth.expires_at, now)}")
    return Admitted(auth.coordinator, kid, auth.txn_id, auth.branch_id, auth.plan_digest, auth.epoch or 0)


def check_epoch(admitted: Admitted, highest: int) -> None:
    """HATP-TRUST-9 (fencing): `highest` is the largest epoch this receiver admitted for the txnId (this request's
    included). A request from a lower epoch comes from a coordinator another has taken the transaction over from:
    refused. Raises HatpError HATP-TRUST-9 (code STALE_COORDINATOR)."""
    if admitted.epoch < highest:
        raise HatpError(
            "HATP-TRUST-9",
            f"transaction {admitted.txn_id!r} is driven at coordinator epoch {highest}; this request is from epoch "
            f"{admitted.epoch}, a coordinator that has been taken over from",
            path="$.auth.epoch",
            code="STALE_COORDINATOR",
            fix="a coordinator whose lease lapsed stops driving the transaction; its current owner finishes it",
        )


def _expired(reason: str) -> HatpError:
    return HatpError(
        "HATP-TRUST-4",
        reason,
        path="$.auth.expiresAt",
        code="AUTH_EXPIRED",
        fix="the coordinator signs a fresh auth for each attempt; check both clocks",
    )


def check_decision(params: Mapping[str, Any], admitted: Admitted, trusted: Keyring) -> None:
    """HATP-TRUST-7: a commit carries the `decision` record event in which the same coordinator decided commit for
    this transaction and plan, and names the vote it rests on (`voteDigest`, which the participant compares with
    its own vote, `check_vote`). Raises HatpError HATP-TRUST-7 (code DECISION_UNPROVEN)."""

    def refuse(reason: str, path: str = "$.decision") -> HatpError:
        return HatpError(
            "HATP-TRUST-7",
            reason,
            path=path,
            code="DECISION_UNPROVEN",
            fix="send the coordinator's signed `decision` event (decision commit) with the commit",
        )

    event = params.get("decision")
    if not isinstance(event, Mapping):
        raise refuse("a commit must carry the coordinator's signed decision to commit")
    try:
        kid = verify_object(event, trusted, "coordinator", "$.decision")
        entry = trusted.get(kid)
        if entry is None:
            raise BrokenInvariant(f"verify_object found key {kid} and the trust list no longer has it")
        check_party(entry, admitted.coordinator, "$.decision", required=True)
    except SignatureError as exc:
        raise refuse(f"{exc.rule}: {exc.reason}", exc.path) from exc
    body = event.get("body")
    expected = {
        "type": "hatp.event",
        "event": "decision",
        "txnId": admitted.txn_id,
        "planDigest": admitted.plan_digest,
        "author": admitted.coordinator,
    }
    for name, want in expected.items():
        if event.get(name) != want:
            raise refuse(f"the decision event names {name} {event.get(name)!r}, not {want!r}", f"$.decision.{name}")
    if not isinstance(body, Mapping) or body.get("decision") != "commit":
        got = body.get("decision") if isinstance(body, Mapping) else None
        raise refuse(f"the decision is {got!r}, not 'commit'", "$.decision.body.decision")
    if not isinstance(params.get("voteDigest"), str):
        raise refuse("a commit names the digest of this branch's yes vote the decision rests on", "$.voteDigest")


def check_binding(admitted: Admitted | Binding, bound: Binding | None) -> None:
    """HATP-TRUST-5: a transaction stays with the coordinator and plan that first touched it here. `admitted`: the
    request, or the binding it made (a deferred write that finds another already kept: hatp_mcp/store/txn_bindings.py).

    Raises HatpError HATP-TRUST-5 (code TXN_BOUND)."""
    if bound is None:
        return
    if bound.coordinator != admitted.coordinator:
        raise HatpError(
            "HATP-TRUST-5",
            f"transaction {admitted.txn_id!r} is bound to coordinator {bound.coordinator!r}; "
            f"{admitted.coordinator!r} cannot act for it",
            path="$.auth.coordinator",
            code="TXN_BOUND",
            fix="a transaction has one coordinator; use a new txnId",
        )
    if bound.plan_digest != admitted.plan_digest:
        raise HatpError(
            "HATP-TRUST-5",
            f"transaction {admitted.txn_id!r} is bound to plan {bound.plan_digest}, not {admitted.plan_digest}",
            path="$.planDigest",
            code="TXN_BOUND",
            fix="a txnId names one plan; use a new txnId for another plan",
        )


def check_vote(vote_digest: str | None, own_vote: Mapping[str, Any] | None) -> None:
    """HATP-TRUST-7, the participant's side: the vote a commit names is the yes vote this participant gave for the
    branch (its latest prepare answer). `vote_digest` None: the caller named none (an in-process coordinator).

    Raises HatpError HATP-TRUST-7 (code VOTE_MISMATCH)."""
    if vote_digest is None or own_vote is None:
        return
    if own_vote.get("decision") != "yes" or digest(own_vote) != vote_digest:
        raise HatpError(
            "HATP-TRUST-7",
            f"the commit rests on vote {vote_digest}, not on this branch's yes vote {digest(own_vote)}",
            path="$.voteDigest",
            code="VOTE_MISMATCH",
            fix="commit on the vote the participant gave last (prepare again if the hold was lost)",
        )

"""The pure checks of a coordinator's signed authorization (hatp_mcp/core/participant/coordinator_auth.py): each
rule broken on purpose, and the exact refusal it gets (spec/mcp-binding.md HATP-TRUST-1..9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from hatp_mcp.core.participant.coordinator_auth import (
    Admitted,
    Binding,
    authorize,
    check_auth,
    check_binding,
    check_decision,
    check_epoch,
    request_digest,
)
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.errors import HatpError
from tests.coordinators import COORDINATOR, KEY, OTHER, OTHER_KEY, decision_event, trust_ring

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
DIGEST = "sha256:" + "a" * 64
RING = trust_ring((COORDINATOR, KEY), (OTHER, OTHER_KEY))


def abort_params(**changes: Any) -> dict[str, Any]:
    return {"type": "hatp.abort", "txnId": "txn-1", "branchId": "seat", "planDigest": DIGEST, **changes}


def signed(method: str = "abort", params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    return authorize(
        method, params or abort_params(), kw.get("key", KEY), kw.get("who", COORDINATOR), kw.get("at", NOW)
    )


def refusal(method: str, params: dict[str, Any], ring: Keyring | None = RING, now: datetime = NOW) -> HatpError:
    with pytest.raises(HatpError) as err:
        check_auth(method, params, ring, now)
    return err.value


def resign(params: dict[str, Any], **auth_changes: Any) -> dict[str, Any]:
    """The same params with the auth changed and signed again by the real coordinator's key."""
    auth = {k: v for k, v in params["auth"].items() if k != "signature"}
    auth.update(auth_changes)
    return {**params, "auth": sign_object({k: v for k, v in auth.items() if v is not None}, KEY)}


def test_a_signed_request_is_admitted_for_its_coordinator_txn_branch_and_plan() -> None:
    got = check_auth("abort", signed(), RING, NOW)
    assert got == Admitted(COORDINATOR, KEY.kid, "txn-1", "seat", DIGEST)
    assert signed()["auth"]["requestDigest"] == request_digest(abort_params())


def test_HATP_TRUST_6_a_receiver_with_no_trusted_coordinator_refuses_and_says_how_to_configure_one() -> None:
    for ring in (None, Keyring()):
        err = refusal("abort", signed(), ring)
        assert (err.rule, err.code, err.path) == ("HATP-TRUST-6", "NO_TRUSTED_COORDINATOR", "$.auth")
        assert "--trusted-coordinators" in err.fix


def test_HATP_TRUST_1_a_request_without_auth_or_with_something_else_is_unproven() -> None:
    missing = refusal("abort", abort_params())
    assert (missing.rule, missing.code, missing.path) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN", "$.auth")
    not_auth = refusal("abort", {**abort_params(), "auth": {"type": "hatp.vote"}})
    assert (not_auth.rule, not_auth.code) == ("HATP-TRUST-1", "COORDINATOR_UNPROVEN")


@pytest.mark.parametrize(
    ("params", "sig_rule"),
    [
        (signed(key=SigningKey.generate(["coordinator"])), "HATP-SIG-2"),  # a key nobody pinned
        (signed(who=OTHER), "HATP-SIG-6"),  # the real key claiming to be the other coordinator
        ({**signed(), "auth": {**signed()["auth"], "expiresAt": "2026-11-29T10:04:00Z"}}, "HATP-SIG-4"),  # altered
    ],
)
def test_HATP_TRUST_2_an_auth_not_signed_by_a_pinned_key_bound_to_its_coordinator_is_unproven(
    params: dict[str, Any], sig_rule: str
) -> None:
    err = refusal("abort", params)
    assert (err.rule, err.code) == ("HATP-TRUST-2", "COORDINATOR_UNPROVEN")
    assert err.reason.startswith(sig_rule)


def test_HATP_TRUST_2_a_trusted_key_bound_to_no_party_or_without_the_role_does_not_count() -> None:
    unbound = Keyring()
    unbound.add_signer(KEY)  # no party: it could speak for any coordinator
    assert refusal("abort", signed(), unbound).reason.startswith("HATP-SIG-6")
    participant_key = SigningKey.generate(["participant"])
    ring = Keyring()
    ring.add_signer(participant_key, COORDINATOR)
    assert refusal("abort", signed(key=participant_key), ring).reason.startswith("HATP-SIG-5")


@pytest.mark.parametrize(
    ("method", "params", "path"),
    [
        ("commit", signed(), "$.auth.method"),  # an abort's auth used for a commit
        ("abort", {**signed(), "txnId": "txn-2"}, "$.auth.txnId"),
        ("abort", {**signed(), "branchId": "room"}, "$.auth.branchId"),
        ("abort", {**signed(), "planDigest": "sha256:" + "b" * 64}, "$.auth.planDigest"),
        ("abort", {**signed(), "reason": "replayed with other params"}, "$.auth.requestDigest"),
    ],
)
def test_HATP_TRUST_3_an_auth_is_good_for_exactly_the_request_it_names(
    method: str, params: dict[str, Any], path: str
) -> None:
    err = refusal(method, params)
    assert (err.rule, err.code, err.path) == ("HATP-TRUST-3", "AUTH_MISMATCH", path)


def test_HATP_TRUST_3_a_prepare_names_the_coordinator_that_signed_it() -> None:
    params = signed("prepare", {**abort_params(type="hatp.prepare"), "coordinator": OTHER})
    err = refusal("prepare", params)
    assert (err.rule, err.code, err.path) == ("HATP-TRUST-3", "AUTH_MISMATCH", "$.auth.coordinator")


def test_HATP_TRUST_4_an_auth_is_fresh_only_within_its_short_life_by_the_receivers_clock() -> None:
    expired = refusal("abort", signed(), now=NOW + timedelta(seconds=121))
    future = refusal("abort", signed(at=NOW + timedelta(seconds=61)))
    long_lived = refusal("abort", resign(signed(), expiresAt="2026-11-29T11:00:00Z"))
    backwards = refusal("abort", resign(signed(), expiresAt="2026-11-29T09:59:00Z"))
    for err in (expired, future, long_lived, backwards):
        assert (err.rule, err.code) == ("HATP-TRUST-4", "AUTH_EXPIRED")
    assert check_auth("abort", signed(), RING, NOW + timedelta(seconds=119)).txn_id == "txn-1"


def test_HATP_TRUST_9_a_request_from_a_lower_epoch_than_the_highest_admitted_is_a_stale_coordinators() -> None:
    admitted = check_auth("abort", resign(signed(), epoch=2), RING, NOW)
    assert admitted.epoch == 2
    assert check_auth("abort", signed(), RING, NOW).epoch == 0  # an auth naming no epoch is epoch 0
    check_epoch(admitted, 2)  # the highest so far is its own
    with pytest.raises(HatpError) as stale:
        check_epoch(admitted, 3)  # planted: another coordinator took over at epoch 3
    assert (stale.value.rule, stale.value.code, stale.value.path) == (
        "HATP-TRUST-9",
        "STALE_COORDINATOR",
        "$.auth.epoch",
    )
    assert "epoch 3" in stale.value.reason and "from epoch 2" in stale.value.reason
    # the epoch is signed: changing it after signing breaks the signature
    forged = {**signed(), "auth": {**signed()["auth"], "epoch": 9}}
    assert refusal("abort", forged).rule == "HATP-TRUST-2"


def test_HATP_TRUST_5_a_bound_txn_stays_with_its_coordinator_and_its_plan() -> None:
    bound = Binding("txn-1", COORDINATOR, DIGEST)
    check_binding(Admitted(COORDINATOR, KEY.kid, "txn-1", "room", DIGEST), bound)  # another branch: fine
    check_binding(Admitted(OTHER, OTHER_KEY.kid, "txn-1", "seat", DIGEST), None)  # unbound: the first one binds
    with pytest.raises(HatpError) as other:
        check_binding(Admitted(OTHER, OTHER_KEY.kid, "txn-1", "seat", DIGEST), bound)
    with pytest.raises(HatpError) as plan:
        check_binding(Admitted(COORDINATOR, KEY.kid, "txn-1", "seat", "sha256:" + "b" * 64), bound)
    assert (other.value.rule, other.value.code, other.value.path) == ("HATP-TRUST-5", "TXN_BOUND", "$.auth.coordinator")
    assert (plan.value.rule, plan.value.code, plan.value.path) == ("HATP-TRUST-5", "TXN_BOUND", "$.planDigest")


def test_HATP_TRUST_7_a_commit_carries_the_same_coordinators_signed_decision_to_commit() -> None:
    admitted = Admitted(COORDINATOR, KEY.kid, "txn-1", "seat", DIGEST)
    vote = {"voteDigest": "sha256:" + "c" * 64}
    check_decision({"decision": decision_event("txn-1", DIGEST), **vote}, admitted, RING)
    cases = {
        "missing": ({}, "$.decision"),
        "no vote named": ({"decision": decision_event("txn-1", DIGEST)}, "$.voteDigest"),
        "abort": ({"decision": decision_event("txn-1", DIGEST, "abort")}, "$.decision.body.decision"),
        "other txn": ({"decision": decision_event("txn-2", DIGEST)}, "$.decision.txnId"),
        "other plan": ({"decision": decision_event("txn-1", "sha256:" + "b" * 64)}, "$.decision.planDigest"),
        "other signer": ({"decision": decision_event("txn-1", DIGEST, key=OTHER_KEY, author=OTHER)}, "$.decision"),
        "unsigned author": (
            {"decision": decision_event("txn-1", DIGEST, key=KEY, author=OTHER)},
            "$.decision.author",
        ),
    }
    for name, (params, path) in cases.items():
        with pytest.raises(HatpError) as err:
            check_decision(params, admitted, RING)
        assert (err.value.rule, err.value.code, err.value.path) == ("HATP-TRUST-7", "DECISION_UNPROVEN", path), name


def test_HATP_TRUST_11_authorize_signs_every_state_changing_method_and_nothing_else() -> None:
    for method in ("prepare", "quote", "commit", "abort", "compensate", "renew"):
        auth = authorize(method, abort_params(), KEY, COORDINATOR, NOW)["auth"]
        assert (auth["method"], auth["coordinator"], auth["signature"]["kid"]) == (method, COORDINATOR, KEY.kid)
    tighten = {"txnId": "txn-1", "requirementId": "finance", "planDigest": DIGEST, "decideBy": "2026-11-29T11:00:00Z"}
    assert check_auth("tighten", authorize("tighten", tighten, KEY, COORDINATOR, NOW), RING, NOW).branch_id == "finance"
    with pytest.raises(ValueError, match="not a state-changing method"):
        authorize("status", abort_params(), KEY, COORDINATOR, NOW)


def test_HATP_GW_97_a_stale_or_long_lived_auth_is_refused_with_its_times_in_words() -> None:
    expired = refusal("abort", signed(), now=NOW + timedelta(minutes=5))
    future = refusal("abort", signed(at=NOW + timedelta(minutes=10)))
    long_lived = refusal("abort", resign(signed(), expiresAt="2026-11-29T11:00:00Z"), now=NOW + timedelta(minutes=2))
    assert expired.reason == "the auth expired at 2026-11-29 10:02 UTC (3 min ago)"
    assert future.reason == (
        "the auth is issued at 2026-11-29 10:10 UTC (in 10 min), ahead of this receiver's clock by more than the 60s"
        " allowed"
    )
    assert long_lived.reason == (
        "an auth lives at most 300s; this one 3600s, from 2026-11-29 10:00 UTC (2 min ago) to 2026-11-29 11:00 UTC"
        " (in 58 min)"
    )
    for err in (expired, future, long_lived):  # the rule, code and path stay; no wire timestamp in the words
        assert (err.rule, err.code, err.path) == ("HATP-TRUST-4", "AUTH_EXPIRED", "$.auth.expiresAt")
        assert "T10:" not in err.reason and "+00:00" not in err.reason

"""core/validate/saga.py: apology-protocol saga artifacts, with that validator's rule names (HATP-SAGA-1..6)."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import rfc8785

from hatp_mcp.core.validate.saga import step_key_hash, validate_saga
from hatp_mcp.core.validate.violation import Violation
from tests.core.validate.test_validator import NOW

SAGA = Path(__file__).resolve().parents[3] / "spec" / "fixtures" / "saga" / "supplier-onboarding.valid.json"


def saga() -> dict[str, Any]:
    return copy.deepcopy(json.loads(SAGA.read_text()))


def found(doc: dict[str, Any]) -> list[tuple[str, str]]:
    return [(v.rule, v.path) for v in validate_saga(doc, NOW)]


def only(doc: dict[str, Any]) -> Violation:
    (v,) = validate_saga(doc, NOW)
    return v


def test_the_supplier_onboarding_saga_is_valid() -> None:
    assert validate_saga(saga(), NOW) == []


def test_a_saga_that_does_not_match_its_schema_reports_schema_violations_only_HATP_SAGA_1() -> None:
    doc = saga()
    del doc["signature"]
    doc["steps"][3]["maxSpendEur"] = 900  # a mandate break that must stay unreported
    doc["steps"][1]["class"] = "reversible"
    assert found(doc) == [("schema", "signature"), ("schema", "steps[1].class")]


def test_booleans_and_float_counts_are_not_integers_HATP_SAGA_1() -> None:
    doc = saga()
    doc["pivotIndex"] = True
    doc["steps"][1]["undoTtlSeconds"] = 86400.5
    assert found(doc) == [("schema", "pivotIndex"), ("schema", "steps[1].undoTtlSeconds")]


def test_a_key_not_derived_from_saga_and_step_id_is_a_schema_violation_HATP_SAGA_1() -> None:
    doc = saga()
    doc["steps"][2]["idempotencyKey"] = "sg_01J8Z9:s1"
    v = only(doc)
    assert (v.rule, v.path) == ("schema", "steps[2].idempotencyKey")
    assert '"sg_01J8Z9:s2"' in v.message


def test_two_steps_sharing_an_id_is_a_schema_violation_HATP_SAGA_1() -> None:
    doc = saga()
    doc["steps"][5]["id"] = "s4"
    doc["steps"][5]["idempotencyKey"] = "sg_01J8Z9:s4"
    assert found(doc) == [("schema", "steps[5].id")]


def test_a_non_compensable_step_before_the_pivot_is_refused_HATP_SAGA_2() -> None:
    doc = saga()
    doc["steps"][2]["class"] = "retriable"
    v = only(doc)
    assert (v.rule, v.path) == ("pivot-ordering", "steps[2].class")
    assert '"s2" (compliance.review) is retriable' in v.message


def test_a_compensable_step_after_the_pivot_is_refused_HATP_SAGA_2() -> None:
    doc = saga()
    doc["steps"][4]["class"] = "compensable"
    doc["steps"][4]["compensation"] = {"tool": "sandbox.destroy"}
    assert found(doc) == [("pivot-ordering", "steps[4].class")]


def test_a_pivot_index_out_of_range_is_reported_alone_HATP_SAGA_2() -> None:
    doc = saga()
    doc["pivotIndex"] = 6
    del doc["steps"][2]["maxDurationSeconds"]  # would be an undo-ttl break with a real pivot
    v = only(doc)
    assert (v.rule, v.path) == ("pivot-ordering", "pivotIndex")
    assert "6 steps" in v.message


def test_an_irreversible_step_with_an_undo_is_refused_HATP_SAGA_3() -> None:
    doc = saga()
    doc["steps"][3]["compensation"] = {"tool": "payments.refund"}
    v = only(doc)
    assert (v.rule, v.path) == ("class-coherence", "steps[3].compensation")
    assert "lying about one of them" in v.message


def test_a_compensable_step_without_an_undo_is_refused_HATP_SAGA_3() -> None:
    doc = saga()
    del doc["steps"][0]["compensation"]
    doc["steps"][0]["idempotencyKey"] = "sg_01J8Z9:s0"
    assert found(doc) == [("class-coherence", "steps[0].compensation")]


def test_a_retriable_step_may_ship_a_compensation_or_not() -> None:
    doc = saga()
    doc["steps"][5]["compensation"] = {"tool": "email.recall"}
    assert validate_saga(doc, NOW) == []


def test_a_step_over_the_mandate_is_refused_HATP_SAGA_4() -> None:
    doc = saga()
    doc["steps"][3]["maxSpendEur"] = 250.01
    v = only(doc)
    assert (v.rule, v.path) == ("mandate", "steps[3].maxSpendEur")
    assert "250.01 EUR" in v.message and "250 EUR" in v.message


def test_steps_that_each_fit_but_together_exceed_the_mandate_are_refused_HATP_SAGA_4() -> None:
    doc = saga()
    doc["steps"][4]["maxSpendEur"] = 10
    v = only(doc)
    assert (v.rule, v.path) == ("mandate", "mandate.maxSpendEur")
    assert "250.5 EUR" in v.message and "s3 240.5 + s4 10" in v.message


def test_a_spend_equal_to_the_mandate_fits() -> None:
    doc = saga()
    doc["steps"][4]["maxSpendEur"] = 9.5
    assert validate_saga(doc, NOW) == []


def test_an_expired_mandate_is_refused_at_the_given_now_HATP_SAGA_4() -> None:
    doc = saga()
    doc["mandate"]["expiresAt"] = "2026-12-01T09:00:00Z"  # equal to now: expired
    assert found(doc) == [("mandate", "mandate.expiresAt")]


def test_a_step_without_a_duration_between_an_undo_window_and_the_pivot_fails_closed_HATP_SAGA_5() -> None:
    doc = saga()
    del doc["steps"][2]["maxDurationSeconds"]
    v = only(doc)
    assert (v.rule, v.path) == ("undo-ttl", "steps[2].maxDurationSeconds")
    assert v.message.startswith('Step "s2" (compliance.review) declares no maxDurationSeconds')
    assert '86400s undo window of "s1"' in v.message
    assert v.message.endswith('Declare maxDurationSeconds on "s2", or move the human step past the pivot.')


def test_the_pivot_itself_must_be_bounded_since_its_failure_needs_the_undo_HATP_SAGA_5() -> None:
    doc = saga()
    del doc["steps"][3]["maxDurationSeconds"]
    v = only(doc)
    assert (v.rule, v.path) == ("undo-ttl", "steps[3].maxDurationSeconds")


def test_a_step_before_the_window_opens_does_not_count_against_it() -> None:
    doc = saga()
    del doc["steps"][0]["maxDurationSeconds"]
    doc["steps"][0]["idempotencyKey"] = "sg_01J8Z9:s0"
    assert validate_saga(doc, NOW) == []


def test_an_undo_window_shorter_than_the_path_to_the_pivot_is_refused_and_equality_fits_HATP_SAGA_5() -> None:
    doc = saga()
    doc["steps"][1]["undoTtlSeconds"] = 14459
    v = only(doc)
    assert (v.rule, v.path) == ("undo-ttl", "steps[1].undoTtlSeconds")
    assert "14460s (s2 14400s + s3 60s)" in v.message
    doc["steps"][1]["undoTtlSeconds"] = 14460
    assert validate_saga(doc, NOW) == []


def test_undo_windows_after_the_pivot_are_inert() -> None:
    doc = saga()
    doc["steps"][4]["undoTtlSeconds"] = 1
    assert validate_saga(doc, NOW) == []


def test_the_key_hash_is_sha256_of_the_rfc8785_form_of_the_step_without_its_key() -> None:
    step = saga()["steps"][3]  # carries a float (maxSpendEur 240.5)
    body = {k: v for k, v in step.items() if k != "idempotencyKey"}
    assert step_key_hash(step) == hashlib.sha256(rfc8785.dumps(body)).hexdigest()


def test_a_key_whose_hash_does_not_match_the_step_is_a_replay_HATP_SAGA_6() -> None:
    doc = saga()
    doc["steps"][0]["compensation"]["args"]["ref"] = "$s0.vendorId"
    v = only(doc)
    assert (v.rule, v.path) == ("key-integrity", "steps[0].idempotencyKey")
    assert f"sg_01J8Z9:s0:{step_key_hash(doc['steps'][0])}" in v.message


def test_a_three_part_key_with_a_matching_hash_passes_and_a_two_part_key_claims_nothing() -> None:
    doc = saga()
    step = doc["steps"][3]
    step["idempotencyKey"] = "sg_01J8Z9:s3:" + step_key_hash(step)
    assert validate_saga(doc, NOW) == []
    assert doc["steps"][4]["idempotencyKey"] == "sg_01J8Z9:s4"


def test_a_window_blown_by_declared_steps_is_reported_beside_an_unbounded_step_HATP_SAGA_5() -> None:
    doc = saga()
    del doc["steps"][3]["maxDurationSeconds"]  # the pivot: unbounded
    doc["steps"][1]["undoTtlSeconds"] = 100  # s2 alone (14400s) already blows it
    vs = validate_saga(doc, NOW)
    assert [(v.rule, v.path) for v in vs] == [
        ("undo-ttl", "steps[1].undoTtlSeconds"),
        ("undo-ttl", "steps[3].maxDurationSeconds"),
    ]
    assert "can take at least 14400s (s2 14400s)" in vs[0].message


def _long_saga(n: int) -> dict[str, Any]:
    """n compensable steps, each with an undo window of 1s, each taking 10s, then an irreversible pivot."""
    doc = saga()
    template = {"tool": "t.do", "class": "compensable", "compensation": {"tool": "t.undo"}}
    steps = [
        {**template, "id": f"k{i}", "idempotencyKey": f"sg_01J8Z9:k{i}", "undoTtlSeconds": 1, "maxDurationSeconds": 10}
        for i in range(n)
    ]
    steps.append({"id": "p", "tool": "t.pay", "class": "irreversible", "idempotencyKey": "sg_01J8Z9:p"})
    doc["steps"], doc["pivotIndex"] = steps, n
    doc["mandate"]["maxSpendEur"] = 1
    return doc


def test_undo_ttl_output_grows_linearly_with_the_steps_HATP_SAGA_5() -> None:
    # Every window but the last is blown (declared steps alone) and the pivot is unbounded: n violations. Each
    # message names a bounded number of steps, so 4x the steps print about 4x the text (it was quadratic: 10,000
    # steps printed 552 MB).
    sizes = {}
    for n in (250, 1000):
        vs = validate_saga(_long_saga(n), NOW)
        assert len(vs) == n
        assert vs[-1].path == f"steps[{n}].maxDurationSeconds"
        sizes[n] = sum(len(v.message) for v in vs)
    assert sizes[1000] < 4.5 * sizes[250]
    first = validate_saga(_long_saga(1000), NOW)[0]
    assert "(k1 10s + k2 10s + k3 10s + k4 10s + k5 10s + k6 10s + 994 more steps)" in first.message


@pytest.mark.parametrize(
    "suffix", ["not-a-sha256-hash", "9B5B8CFB233284327CDEE1972C13A0E83877F7DF687EF3D3BFC19657695E551D"]
)
def test_a_key_suffix_that_is_not_64_lowercase_hex_is_a_schema_violation_HATP_SAGA_1(suffix: str) -> None:
    doc = saga()
    doc["steps"][0]["idempotencyKey"] = "sg_01J8Z9:s0:" + suffix
    v = only(doc)
    assert (v.rule, v.path) == ("schema", "steps[0].idempotencyKey")
    assert "64 lowercase hex digits" in v.message


@pytest.mark.parametrize(
    ("where", "member"),
    [
        ("steps[1]", "compensation"),
        ("steps[1]", "undoTtlSeconds"),
        ("steps[1]", "maxSpendEur"),
        ("steps[1]", "maxDurationSeconds"),
        ("steps[1].compensation", "args"),
        ("", "$comment"),
    ],
)
def test_null_is_refused_for_an_optional_member_which_may_only_be_absent_HATP_SAGA_1(where: str, member: str) -> None:
    doc = saga()
    target = doc if not where else doc["steps"][1] if where == "steps[1]" else doc["steps"][1]["compensation"]
    target[member] = None
    vs = validate_saga(doc, NOW)
    assert [v.rule for v in vs] == ["schema"]
    assert vs[0].path == (f"{where}.{member}" if where else f'["{member}"]')


@pytest.mark.parametrize(
    ("value", "said"),
    [(99999999999999999999, "outside +-(2**53 - 1)"), (float("inf"), "has no JSON form"), ("\ud800", "surrogate")],
)
def test_a_hashed_key_over_a_value_without_a_canonical_form_fails_closed_HATP_SAGA_6(value: object, said: str) -> None:
    doc = saga()
    doc["steps"][0]["compensation"]["args"]["n"] = value  # s0 carries a three-part key
    v = only(doc)
    assert (v.rule, v.path) == ("key-integrity", "steps[0].idempotencyKey")
    assert said in v.message and "cannot be checked" in v.message

"""core/validate/saga.py: apology-protocol saga artifacts, with that validator's rule names (HATP-SAGA-1..6)."""

from __future__ import annotations

import copy
import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from hatp_mcp.core.signing.canonical import CanonicalError
from hatp_mcp.core.validate import saga as saga_mod
from hatp_mcp.core.validate import saga_view
from hatp_mcp.core.validate.saga import SagaPlan, SagaView, step_key_hash, validate_saga
from hatp_mcp.core.validate.violation import Violation
from tests.compiled import nodes
from tests.core.validate.saga_oracle import oracle_validate_saga
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


def test_HATP_GW_97_a_saga_whose_mandate_expired_says_when_in_words() -> None:
    doc = saga()
    doc["mandate"]["expiresAt"] = "2026-12-01T06:30:00Z"
    assert only(doc).message == (
        "The mandate expired at 2026-12-01 06:30 UTC (2 h 30 min ago): the plan must not outlive it. Ask the principal"
        " for a new mandate."
    )


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


# The fast path (the plan read straight from its JSON) against the model path (SagaPlan, which hands its members
# back to the same reader) and against the oracle (saga_oracle.py: the rules as they ran over the models before the
# fast path): the same violations, rule, path and message, on near-valid sagas.

FIXTURE_PLANS = [
    json.loads(p.read_text()) for p in sorted(SAGA.parent.glob("*.json")) if not p.name.endswith(".expected.json")
]


class _Str(str):
    """A str subclass: the model takes it, the fast path leaves it to the model."""


_ODD_VALUES: list[object] = [
    None, True, False, 0, 1, -1, 7, 2**53, 2**53 + 1, 2**70, 10**400, 0.0, -0.0, 0.5, 240.5, -1.5, 1e300,
    float("nan"), float("inf"), "", "x", "s1", "\ud800", "é — ü", _Str("x"), [], {}, [1], {"tool": "t.undo"},
    {"tool": "t.undo", "args": {}}, {"tool": "t.undo", "args": None}, {"tool": "", "args": {}},
    {"tool": "t.undo", "args": {"n": 1.5}}, {"tool": "t.undo", "extra": 1},
    "compensable", "retriable", "irreversible", "2027-08-07T18:00:00Z", "2027-08-07T18:00:00.5Z",
    "2027-13-07T18:00:00Z", "2027-08-07T18:00:00Z\n", "2027-08-07 18:00:00Z", "2026-12-01T09:00:00Z",
]  # fmt: skip
_EXTRA_MEMBERS = ["extra", "saga_id", "step_class", "idempotency_key", "$comment", "args", "tool", "undoTtlSeconds"]
# The model also takes a member by its Python name (populate_by_name): the fast path leaves those to the model.
_PYTHON_NAMES = {
    "sagaId": "saga_id",
    "pivotIndex": "pivot_index",
    "authoredBy": "authored_by",
    "maxSpendEur": "max_spend_eur",
    "expiresAt": "expires_at",
    "class": "step_class",
    "idempotencyKey": "idempotency_key",
    "undoTtlSeconds": "undo_ttl_seconds",
    "maxDurationSeconds": "max_duration_seconds",
}


@st.composite
def schema_valid_sagas(draw: st.DrawFn) -> dict[str, Any]:
    """Sagas that match the schema, with any classes, windows, durations, spends and keys (rules broken or not)."""
    n = draw(st.integers(1, 9))
    small = st.integers(1, 100) | st.sampled_from([2**53, 2**60])
    steps = []
    for i in range(n):
        step: dict[str, Any] = {
            "id": draw(st.sampled_from([f"s{i}", f"s{i}", "s0", "é"])),
            "tool": draw(st.sampled_from(["t.do", "payments.capture"])),
            "class": draw(st.sampled_from(["compensable", "compensable", "retriable", "irreversible"])),
        }
        if draw(st.booleans()):
            step["compensation"] = draw(st.sampled_from([{"tool": "t.undo"}, {"tool": "t.undo", "args": {"a": 1}}]))
        if draw(st.booleans()):
            step["undoTtlSeconds"] = draw(small)
        if draw(st.booleans()):
            step["maxDurationSeconds"] = draw(st.integers(0, 100))
        if draw(st.booleans()):
            step["maxSpendEur"] = draw(st.integers(0, 100) | st.floats(0, 100) | st.sampled_from([2**53, 0.1]))
        step["idempotencyKey"] = f"sg:{step['id']}"
        if draw(st.booleans()):
            try:
                claim = draw(st.sampled_from([step_key_hash(step), "0" * 64]))
            except CanonicalError:  # a spend past 2**53 - 1 has no exact form: a claim that cannot be checked
                claim = "f" * 64
            step["idempotencyKey"] += ":" + claim
        steps.append(step)
    return {
        "sagaId": "sg",
        "planVersion": draw(st.integers(1, 3)),
        "authoredBy": {"agent": "planner@acme", "model": "m"},
        "signature": "ed25519:x",
        "pivotIndex": draw(st.integers(0, n)),
        "mandate": {
            "maxSpendEur": draw(st.integers(0, 200) | st.floats(0, 200) | st.just(2**53)),
            "expiresAt": draw(st.sampled_from(["2027-08-07T18:00:00Z", "2026-12-01T09:00:00.000001Z"])),
        },
        "steps": steps,
    }


@st.composite
def near_valid_sagas(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(FIXTURE_PLANS) | schema_valid_sagas()))
    for _ in range(draw(st.integers(0, 3))):
        container, key = draw(st.sampled_from(nodes(doc)))
        op = draw(st.sampled_from(["replace", "replace", "delete", "add", "rename", "rekey", "copy-id", "dup-step"]))
        if op == "rename" and isinstance(container, dict) and key in _PYTHON_NAMES:
            container[_PYTHON_NAMES[key]] = container.pop(key)
        elif op == "replace":
            container[key] = copy.deepcopy(draw(st.sampled_from(_ODD_VALUES)))
        elif op == "delete":
            del container[key]
        elif op == "add" and isinstance(container, dict):
            container[draw(st.sampled_from(_EXTRA_MEMBERS))] = copy.deepcopy(draw(st.sampled_from(_ODD_VALUES)))
        elif op in ("rekey", "copy-id", "dup-step") and isinstance(doc.get("steps"), list) and doc["steps"]:
            steps = doc["steps"]
            i = draw(st.integers(0, len(steps) - 1))
            step = steps[i]
            if not isinstance(step, dict):
                continue
            if op == "dup-step":
                steps.insert(draw(st.integers(0, len(steps))), copy.deepcopy(step))
            elif op == "copy-id":
                other = draw(st.sampled_from(steps))
                step["id"] = copy.deepcopy(other.get("id", "s0")) if isinstance(other, dict) else "s0"
            else:
                base = f"{doc.get('sagaId')}:{step.get('id')}"
                suffix = draw(st.sampled_from(["", "hash", "wrong", "upper", "short"]))
                if suffix == "hash":
                    try:
                        step["idempotencyKey"] = f"{base}:{step_key_hash(step)}"
                    except CanonicalError:  # a step with no canonical form: leave the key
                        pass
                else:
                    tail = {"": "", "wrong": ":" + "0" * 64, "upper": ":" + "A" * 64, "short": ":abc"}[suffix]
                    step["idempotencyKey"] = base + tail
    return doc


NOWS = [NOW, datetime(2026, 8, 11, 9, tzinfo=UTC), datetime(2030, 1, 1, tzinfo=UTC)]


def _by_model(doc: Any, now: datetime) -> list[Violation]:
    """validate_saga with the fast path refused for `doc` itself: the model validates it and gives the members."""
    read = saga_mod._view_of_json
    with mock.patch.object(saga_mod, "_view_of_json", lambda value: None if value is doc else read(value)):
        return validate_saga(doc, now)


def _read(view: SagaView) -> str:
    """Everything the rules read from a view; repr, so that 250 and 250.0 differ."""
    # its members: the class's __slots__ as Python; compiled (mypyc, a native class), its __mypyc_attrs__
    names = sorted(getattr(SagaView, "__mypyc_attrs__", None) or SagaView.__slots__)
    members = [getattr(view, name) for name in names if name != "steps"]
    steps = [
        [s[k] for k in ("id", "tool", "class", "idempotencyKey")]
        + [s["compensation"]["tool"] if "compensation" in s else None, saga_view._spend(s)]
        + [s.get(k) for k in ("undoTtlSeconds", "maxDurationSeconds")]
        for s in view.steps
    ]
    return repr([members, steps])


@settings(max_examples=1500, deadline=None)
@given(near_valid_sagas(), st.sampled_from(NOWS))
def test_the_fast_path_reports_exactly_what_the_model_path_reports_HATP_SAGA_1(doc: Any, now: datetime) -> None:
    fast = [v.to_dict() for v in validate_saga(doc, now)]
    assert fast == [v.to_dict() for v in oracle_validate_saga(doc, now)]
    assert fast == [v.to_dict() for v in _by_model(doc, now)]
    view = saga_mod._view_of_json(doc)
    if view is not None:  # the fast path takes only what the model takes, and reads the same values from it
        by_model = saga_mod._view_of_json(saga_mod._json_of_model(SagaPlan.model_validate(doc)))
        assert by_model is not None and _read(view) == _read(by_model)


def test_the_fast_path_takes_every_fixture_the_model_takes() -> None:
    # Not a timing test: a fast path that fell back on the plans it exists for would be correct and slow.
    taken = 0
    for doc in FIXTURE_PLANS:
        try:
            SagaPlan.model_validate(doc)
        except ValidationError:
            assert saga_mod._view_of_json(doc) is None
            continue
        taken += 1
        assert saga_mod._view_of_json(doc) is not None
    assert taken >= 10


def test_every_saga_fixture_gives_the_oracle_s_violations_through_both_paths() -> None:
    for doc in FIXTURE_PLANS:
        for now in NOWS:
            want = [v.to_dict() for v in oracle_validate_saga(doc, now)]
            assert [v.to_dict() for v in validate_saga(doc, now)] == want
            assert [v.to_dict() for v in _by_model(doc, now)] == want

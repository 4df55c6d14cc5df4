"""spec/vectors/: the interop vectors match the code, and check out with tools that are not this implementation."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hatp_mcp.cli import main
from hatp_mcp.core.signing.canonical import CanonicalError, canonical

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((VECTORS / name).read_text())
    return doc


def _b64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_the_committed_vectors_are_what_the_code_generates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vectors", "--check", str(VECTORS)]) == 0
    assert "6 vector files match the code" in capsys.readouterr().out


def test_a_vector_file_that_drifted_is_reported_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vectors", "--write", str(tmp_path)]) == 0
    (tmp_path / "plan.json").write_text((tmp_path / "plan.json").read_text().replace("sha256:", "sha256:0"))
    assert main(["vectors", "--check", str(tmp_path)]) == 1
    assert "['plan.json']" in capsys.readouterr().err


def test_every_canonical_vector_is_what_the_reference_rfc8785_prints() -> None:
    cases = _load("canonical.json")["cases"]
    assert len([c for c in cases if "canonical" in c]) >= 30
    for case in cases:
        value = json.loads(case["input"])
        if "refused" in case:
            with pytest.raises(CanonicalError) as err:
                canonical(value, allow_floats=case["allowFloats"])
            assert err.value.rule == case["refused"]
            continue
        expected = case["canonical"].encode()
        assert rfc8785.dumps(value) == expected, case["name"]
        assert hashlib.sha256(expected).hexdigest() == case["sha256"]


def test_the_plan_digest_is_sha256_of_the_reference_canonical_form_of_the_normalized_plan() -> None:
    plan = _load("plan.json")
    data = rfc8785.dumps(plan["normalized"])
    assert data == plan["canonical"].encode()
    assert plan["planDigest"] == "sha256:" + hashlib.sha256(data).hexdigest()


def test_every_signed_vector_verifies_with_plain_ed25519_and_every_tampered_copy_fails() -> None:
    keys = _load("keys.json")["keys"]
    evidence = _load("evidence.json")
    for case in evidence["cases"]:
        signed = case["signed"]
        body = {k: v for k, v in signed.items() if k != "signature"}
        assert rfc8785.dumps(body) == case["signingBytes"].encode()
        assert body["planDigest"] == evidence["planDigest"]
        public = Ed25519PublicKey.from_public_bytes(_b64u(keys[signed["signature"]["kid"]]["x"]))
        public.verify(_b64u(signed["signature"]["sig"]), rfc8785.dumps(body))
        tampered = {k: v for k, v in case["tampered"]["object"].items() if k != "signature"}
        assert tampered != body
        with pytest.raises(InvalidSignature):
            public.verify(_b64u(signed["signature"]["sig"]), rfc8785.dumps(tampered))


def _verify_plain(obj: dict[str, Any], keys: dict[str, Any]) -> None:
    """Plain Ed25519 over the reference canonical form of the object without its signature (HATP-SIG-1)."""
    body = {k: v for k, v in obj.items() if k != "signature"}
    public = Ed25519PublicKey.from_public_bytes(_b64u(keys[obj["signature"]["kid"]]["x"]))
    public.verify(_b64u(obj["signature"]["sig"]), rfc8785.dumps(body))


def _digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def test_every_approval_vector_verifies_with_plain_ed25519_and_names_the_call_digest_it_is_about() -> None:
    keys = _load("keys.json")["keys"]
    doc = _load("approvals.json")
    call = doc["toolCall"]
    assert call["argumentsDigest"] == _digest(call["arguments"]) == call["call"]["argumentsDigest"]
    assert call["call"]["maxAmount"] == call["arguments"]["amount"]  # what amountFrom points at
    assert call["call"]["payee"] == call["arguments"]["payee"]
    assert rfc8785.dumps(call["call"]) == call["callCanonical"].encode()
    assert call["callDigest"] == _digest(call["call"]) and call["askId"] == "toolcall." + call["callDigest"][7:31]
    cases = {c["name"]: c for c in doc["cases"]}
    assert set(cases) == {"tool-call-approval", "tool-call-proof", "plan-approval", "plan-proof"}
    for case in cases.values():
        signed = case["signed"]
        assert rfc8785.dumps({k: v for k, v in signed.items() if k != "signature"}) == case["signingBytes"].encode()
        _verify_plain(signed, keys)
        with pytest.raises(InvalidSignature):
            _verify_plain(case["tampered"]["object"], keys)
    tool = cases["tool-call-approval"]["signed"]
    assert tool["subject"] == "tool-call" and tool["toolCall"] == call["call"]
    assert tool["planDigest"] == tool["routing"]["planDigest"] == call["callDigest"]
    assert tool["decisions"][0]["proof"] == cases["tool-call-proof"]["signed"]
    assert cases["tool-call-proof"]["signed"]["subjectDigest"] == call["callDigest"]
    assert cases["tool-call-proof"]["signed"]["askId"] == call["askId"]
    plan = cases["plan-approval"]["signed"]
    assert plan["planDigest"] == doc["planDigest"] == cases["plan-proof"]["signed"]["subjectDigest"]
    assert cases["plan-proof"]["signed"]["askId"] == f"{plan['txnId']}/{plan['requirementId']}"


def test_the_record_vector_chains_and_verifies_with_plain_tools_and_its_heads_name_its_events() -> None:
    keys = _load("keys.json")["keys"]
    doc = _load("record.json")
    events = doc["record"]["events"]
    assert doc["eventDigests"] == [_digest(e) for e in events]
    assert doc["record"]["planDigest"] == _load("plan.json")["planDigest"]
    heads = 0
    for i, event in enumerate(events):
        assert event["seq"] == i and event.get("prev") == (doc["eventDigests"][i - 1] if i else None)
        _verify_plain(event, keys)
        evidence = event.get("evidence")
        if evidence is None:
            continue
        _verify_plain(evidence, keys)
        if "recordHead" in evidence:  # HATP-REC-19: the head the party answered at is an earlier event of this record
            heads += 1
            head = evidence["recordHead"]
            assert head["seq"] < i and head["digest"] == doc["eventDigests"][head["seq"]]
            if evidence.get("phase") == "commit":
                assert events[head["seq"]]["event"] == "decision"
    assert heads == 12
    exported = [answer for export in doc["exports"] for answer in export["evidence"]]
    assert len(exported) == 12 and all(answer in [e.get("evidence") for e in events] for answer in exported)
    forged = doc["forged"]["events"]
    assert [e["event"] for e in forged] == ["txn.begin", "abort.requested", "decision", "record.closed"]
    for event in forged:
        _verify_plain(event, keys)  # the coordinator's own key: the forgery is valid on its own


def test_the_record_vector_expectations_are_what_hatp_verify_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The vector's `expected` (HATP-REC-21 for the forged copy with the exports) is what this verifier finds, and
    what `hatp verify --json` prints, run as another implementation would run its own."""
    doc = _load("record.json")
    ring = tmp_path / "ring.json"
    ring.write_text(json.dumps(doc["keyring"]))
    exports = []
    for i, export in enumerate(doc["exports"]):
        path = tmp_path / f"export-{i}.json"
        path.write_text(json.dumps(export))
        exports += ["--evidence", str(path)]
    for name, record, flags in (
        ("record", doc["record"], []),
        ("recordWithEvidence", doc["record"], exports),
        ("forged", doc["forged"], []),
        ("forgedWithEvidence", doc["forged"], exports),
    ):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(record))
        code = main(["verify", str(path), "--keys", str(ring), "--json", *flags])
        found = json.loads(capsys.readouterr().out)
        want = doc["expected"][name]
        assert code == (0 if want["ok"] else 1), name
        assert [{"index": p["index"], "rule": p["rule"]} for p in found["problems"]] == want["problems"], name
        assert (found["outcome"], found["anchoring"], found["anchors"]["pinnedTo"]) == (
            want["outcome"],
            want["anchoring"],
            want["pinnedTo"],
        ), name
    assert {p["rule"] for p in doc["expected"]["forgedWithEvidence"]["problems"]} == {"HATP-REC-21"}

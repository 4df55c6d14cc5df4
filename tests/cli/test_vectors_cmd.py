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
from hatp_mcp.core.evidence.canonical import CanonicalError, canonical

VECTORS = Path(__file__).resolve().parents[2] / "spec" / "vectors"


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((VECTORS / name).read_text())
    return doc


def _b64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_the_committed_vectors_are_what_the_code_generates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vectors", "--check", str(VECTORS)]) == 0
    assert "4 vector files match the code" in capsys.readouterr().out


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

"""`hatp vectors --write DIR` / `--check DIR`: interop vectors (spec/vectors/), so another implementation of HATP
can test itself without running this one.

Each file is generated here from fixed inputs and fixed test-only keys (Ed25519 signatures are deterministic, so
the output is too): canonical JSON inputs with their RFC 8785 bytes and digests (the RFC's own examples and
number vectors among them), the keys, a plan with its normalized wire form and digest, signed evidence (a vote and
receipts) and approvals (a gated tool call's and a plan's, with a person's own proof) with the exact bytes each
signature covers, plus tampered copies that must fail, and a whole signed record with its anchored heads and a
planted violation (hatp_mcp/cli/vector_record.py). `--check`
regenerates and compares, so the committed files cannot drift from the code (a test runs it). The keys are
public test vectors: never trust them for anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, fail
from hatp_mcp.cli.vector_keys import KEYS, key
from hatp_mcp.cli.vector_record import approval_vectors, record_vectors
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import canonical
from hatp_mcp.core.signing.keys import SigningKey, sign_object, signing_bytes

__all__ = ["add_arguments", "generated", "run"]


_TRIP = Path(__file__).resolve().parents[2] / "spec" / "fixtures" / "hatp" / "trip.valid.json"

# (name, JSON text, floats allowed): what a canonicalizer must print. Texts, not values: member order, escapes
# and number spellings are part of the input.
_CANONICAL_INPUTS: tuple[tuple[str, str, bool], ...] = (
    (
        "rfc8785-3.2.2-example",
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], '
        '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", '
        '"literals": [null, true, false]}',
        True,
    ),
    (
        "rfc8785-3.2.3-sorting",
        '{"\\u20ac": "Euro Sign", "\\r": "Carriage Return", "\\ufb33": "Hebrew Letter Dalet With Dagesh", '
        '"1": "One", "\\ud83d\\ude00": "Emoji: Grinning Face", "\\u0080": "Control", '
        '"\\u00f6": "Latin Small Letter O With Diaeresis"}',
        False,
    ),
    ("nested-objects-and-arrays", '{"b": [3, {"z": 1, "a": [true, null]}], "a": {"y": "", "x": -0}}', False),
    ("safe-integer-bounds", '{"max": 9007199254740991, "min": -9007199254740991, "zero": 0}', False),
    ("amounts-are-strings", '{"amount": {"value": "412.50", "currency": "USD"}, "tolerancePercent": "2"}', False),
    ("control-characters-escaped", '{"s": "tab\\there, bell\\u0007, nul\\u0000, del\\u007f"}', False),
)
# RFC 8785 Appendix B: IEEE 754 bit patterns and the ECMAScript form a canonicalizer prints for each.
_APPENDIX_B = (
    "0000000000000000", "8000000000000000", "0000000000000001", "8000000000000001", "7fefffffffffffff",
    "ffefffffffffffff", "4340000000000000", "c340000000000000", "4430000000000000", "44b52d02c7e14af5",
    "44b52d02c7e14af6", "44b52d02c7e14af7", "444b1ae4d6e2ef4e", "444b1ae4d6e2ef4f", "444b1ae4d6e2ef50",
    "3eb0c6f7a0b5ed8c", "3eb0c6f7a0b5ed8d", "41b3de4355555553", "41b3de4355555554", "41b3de4355555555",
    "41b3de4355555556", "41b3de4355555557", "becbf647612f3696", "43143ff3c1cb0959",
)  # fmt: skip
# What HATP refuses to canonicalize (HATP-CANON-2) where floats are not allowed, and why.
_REFUSED: tuple[tuple[str, str], ...] = (
    ("a-float-in-a-hatp-object", '{"amount": 412.5}'),
    ("an-unsafe-integer", '{"n": 9007199254740992}'),
    ("a-lone-surrogate", '{"s": "\\ud800"}'),
)


def _canonical_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for name, text, floats in _CANONICAL_INPUTS:
        out = canonical(json.loads(text), allow_floats=floats)
        cases.append(
            {
                "name": name,
                "input": text,
                "allowFloats": floats,
                "canonical": out.decode(),
                "sha256": hashlib.sha256(out).hexdigest(),
            }
        )
    for bits in _APPENDIX_B:
        value = struct.unpack(">d", bytes.fromhex(bits))[0]
        out = canonical([value], allow_floats=True)
        cases.append(
            {
                "name": f"rfc8785-appendix-b-{bits}",
                "input": f"[{value!r}]",
                "ieee754": bits,
                "allowFloats": True,
                "canonical": out.decode(),
                "sha256": hashlib.sha256(out).hexdigest(),
            }
        )
    refused = [{"name": n, "input": t, "allowFloats": False, "refused": "HATP-CANON-2"} for n, t in _REFUSED]
    return cases + refused


def _signed_case(name: str, body: dict[str, Any], key: SigningKey, tamper: tuple[str, Any]) -> dict[str, Any]:
    signed = sign_object(body, key)
    field, value = tamper
    return {
        "name": name,
        "kid": key.kid,
        "signingBytes": signing_bytes(signed).decode(),
        "signed": signed,
        "tampered": {"change": {field: value}, "object": {**signed, field: value}, "refused": "HATP-SIG-4"},
    }


def _evidence(plan: Plan) -> list[dict[str, Any]]:
    airline = key("airline")
    base = {"txnId": plan.txn_id, "branchId": "seat", "planDigest": plan.digest(), "issuedAt": "2026-12-01T09:00:05Z"}
    participant = KEYS["airline"][1]
    vote = {"type": "hatp.vote", **base, "voter": participant, "decision": "yes"}
    prepare = {
        "type": "hatp.receipt",
        **base,
        "participant": participant,
        "phase": "prepare",
        "outcome": "ok",
        "preconditions": {"versions": {"seat:12A": "v7"}, "credentialScope": "seats:hold"},
        "leaseExpiresAt": "2026-12-01T09:15:05Z",
        "holdHorizon": "2026-12-01T13:00:00Z",
    }
    commit = {**base, "type": "hatp.receipt", "participant": participant, "phase": "commit", "outcome": "ok"}
    commit["issuedAt"] = "2026-12-01T09:00:09Z"
    return [
        _signed_case("vote-yes", vote, airline, ("decision", "no")),
        _signed_case("prepare-receipt", prepare, airline, ("holdHorizon", "2026-12-02T13:00:00Z")),
        _signed_case("commit-receipt", commit, airline, ("outcome", "refused")),
    ]


def generated() -> dict[str, str]:
    """file name -> text, for every vector file."""
    plan_doc = json.loads(_TRIP.read_text())
    plan = Plan.model_validate(plan_doc)
    wire = plan.wire()
    docs: dict[str, Any] = {
        "canonical.json": {
            "about": "RFC 8785 canonical JSON: parse `input` (JSON text), canonicalize, compare with `canonical` "
            "(UTF-8) and its sha256. `allowFloats: false` is HATP's domain for its own objects (amounts are "
            "decimal strings); cases with `refused` must be refused with that rule.",
            "cases": _canonical_cases(),
        },
        "keys.json": {
            "about": "TEST-ONLY Ed25519 keys (private JWKs; d is the 32-byte seed sha256('hatp interop vector key: "
            "<name>')). Public test vectors: never trust them for anything.",
            "keys": {name: {**key(name).private_jwk(), "party": party} for name, (_r, party) in KEYS.items()},
        },
        "plan.json": {
            "about": "A plan as an agent wrote it (`input`), its normalized wire form (parsed, nulls omitted, "
            "defaults written), the canonical bytes of that form and the plan digest, sha256 of those bytes.",
            "input": plan_doc,
            "normalized": wire,
            "canonical": canonical(wire).decode(),
            "planDigest": plan.digest(),
        },
        "evidence.json": {
            "about": "Signed evidence: `signingBytes` is the canonical form of the object without its `signature` "
            "member, and `signature.sig` the base64url Ed25519 signature of those bytes by key `kid` (keys.json). "
            "Each `tampered.object` changes one member after signing and must fail verification.",
            "planDigest": plan.digest(),
            "cases": _evidence(plan),
        },
        "approvals.json": approval_vectors(plan),
        "record.json": record_vectors(plan),
    }
    return {name: json.dumps(doc, indent=2, ensure_ascii=False) + "\n" for name, doc in docs.items()}


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="DIR")
    group.add_argument("--check", metavar="DIR")


def run(args: argparse.Namespace) -> int:
    want = generated()
    if args.write:
        d = Path(args.write)
        d.mkdir(parents=True, exist_ok=True)
        for name, text in want.items():
            (d / name).write_text(text)
        print(f"wrote {len(want)} vector files to {d}")
        return EXIT_OK
    d = Path(args.check)
    drift = sorted(n for n, t in want.items() if not (d / n).exists() or (d / n).read_text() != t)
    if drift:
        return fail(f"vectors in {d} drift from the code: {drift}; run `make vectors`", EXIT_PROBLEMS)
    print(f"{len(want)} vector files match the code")
    return EXIT_OK

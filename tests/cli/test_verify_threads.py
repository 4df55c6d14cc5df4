"""`hatp verify --verify-threads N`: the record's signatures are verified on N threads ahead of the checks, into the
keyring's memo, and the sequential checks stay the authority: every planted bad signature (a coordinator's, a
party's, a foreign kid's, a bad encoding) is refused with exactly the problems, in exactly the order, one thread
finds; a triple that fails ahead is never remembered; --verify-threads is bounded."""

from __future__ import annotations

import copy
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.cli import main
from hatp_mcp.cli.verify_cmd import checking_keyring, verify_ahead
from hatp_mcp.core.signing.keys import Keyring, SigningKey, b64u, b64u_decode, sign_object
from hatp_mcp.core.txn.record import check_record, signatures_ahead
from tests.factories import signed_trip_record

_RECORD, _RING, _KEYS = signed_trip_record("txn-verify-threads-1")
_POOL = ThreadPoolExecutor(max_workers=7, thread_name_prefix="test-verify-ahead")


def _flip(sig: str) -> str:
    """The same signature with one bit changed: the right shape, and it fails (one bent already stays bent)."""
    try:
        raw = bytearray(b64u_decode(sig))
    except ValueError:
        return sig
    raw[7] ^= 0x01
    return b64u(bytes(raw))


def _bend(record: dict[str, Any], k: int, how: str) -> None:
    ev = record["events"][k]
    target = ev["evidence"] if how.startswith("evidence") and "evidence" in ev else ev
    if how.endswith("flip"):
        target["signature"]["sig"] = _flip(target["signature"]["sig"])
    elif how.endswith("edit"):
        target["issuedAt" if target is not ev else "at"] = "2026-11-29T10:00:01Z"
        target.setdefault("note", "x")
    elif how.endswith("foreign"):
        signed = sign_object(target, SigningKey.generate(["coordinator", "participant"], kid="mallory"))
        target["signature"] = signed["signature"]
    elif how.endswith("encoding"):
        target["signature"]["sig"] = target["signature"]["sig"] + "="


def _checked(record: dict[str, Any], threads: int) -> Any:
    ring = checking_keyring(_RING, threads)  # as `hatp verify` loads it: no memo on one thread, an empty one on more
    verify_ahead(record, ring, threads, _POOL if threads > 1 else None)
    return check_record(record, ring)


_HOW = st.sampled_from(["flip", "edit", "foreign", "encoding", "evidence-flip", "evidence-edit", "evidence-foreign"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_RECORD["events"]) - 1), _HOW), max_size=4), st.integers(2, 4))
def test_planted_bad_signatures_give_the_same_problems_in_the_same_order_on_one_thread_and_more(
    bends: list[tuple[int, str]], threads: int
) -> None:
    record = copy.deepcopy(_RECORD)
    for k, how in bends:
        _bend(record, k, how)
    one = _checked(record, 1)
    assert _checked(record, threads) == one
    if record != _RECORD:  # (two flips of one bit undo each other)
        assert one.problems  # every bend breaks a signature (or what it covers)


def test_a_bad_signature_is_refused_by_the_checks_on_two_threads_and_never_remembered() -> None:
    record = copy.deepcopy(_RECORD)
    _bend(record, 5, "flip")  # a coordinator's signature
    _bend(record, 9, "evidence-flip")  # the gateway's vote's
    ring = Keyring(_RING.entries())
    triples = signatures_ahead(record, ring)
    assert len(triples) == 31  # 17 events, 14 pieces of evidence: every signature the checks will verify
    # the bad ones did not verify ahead (event 9 covers its evidence: its own signature fails too)
    assert verify_ahead(record, ring, 2, _POOL) == 28
    found = check_record(record, ring)
    expected = [(5, "HATP-SIG-4"), (6, "HATP-REC-2"), (9, "HATP-SIG-4"), (9, "HATP-SIG-4"), (10, "HATP-REC-2")]
    assert [(p.index, p.rule) for p in found.problems][:5] == expected
    assert found.problems[3].reason.startswith("evidence: signature by 'gw-1' does not match")
    assert found == check_record(record, Keyring(_RING.entries()))  # one thread, nothing ahead: the same


def test_verify_ahead_on_one_thread_does_nothing() -> None:
    ring = Keyring(_RING.entries())
    assert verify_ahead(_RECORD, ring, 1) == 0
    assert verify_ahead(_RECORD, ring, 3) == 31  # (a pool of its own when none is given)


def test_the_cli_prints_the_same_on_one_and_two_threads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = copy.deepcopy(_RECORD)
    _bend(record, 12, "evidence-flip")
    rec, keys = tmp_path / "record.json", tmp_path / "keys.json"
    rec.write_text(json.dumps(record))
    keys.write_text(json.dumps(_RING.to_jwks()))
    outs = []
    for n in ("1", "2"):
        assert main(["verify", str(rec), "--keys", str(keys), "--json", "--verify-threads", n]) == 1
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1] and (12, "HATP-SIG-4") in [(p["index"], p["rule"]) for p in outs[0]["problems"]]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_RECORD))
    assert main(["verify", str(good), "--keys", str(keys), "--verify-threads", "2"]) == 0


@pytest.mark.parametrize("n", ["0", "9", "-1", "two", "1.5"])
def test_verify_threads_is_bounded(tmp_path: Path, n: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "r.json", "--keys", "k.json", f"--verify-threads={n}"]) == 2
    assert "must be a whole number from 1 to 8" in capsys.readouterr().err

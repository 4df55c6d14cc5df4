"""The gate verifies an approval's signatures on two threads (ApprovalGate._verify_together), and nothing it
decides changes: an approval wrong in two ways is refused with the refusal the one-thread check gives (the same
rule, path and reason, so the same precedence), a good one accepted; and a verifier thread that is busy or slow
never holds a call up: the calling thread takes its work back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.gated_tools.checks import _parse, check_approval
from hatp_mcp.core.gated_tools.signatures import SignedPart, signed_parts, verify_part
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp import gated_tools as gate_module
from hatp_mcp.mcp.gated_tools import create_approval_gate
from hatp_mcp.store.replay_cache import SqliteReplayCache
from tests.acme_org import agent_keys, agent_request, gateway_key, human_keys, keyring
from tests.core.gated_tools.test_checks import DEFINED_AT, NOW, REQ, SERVER, call, issue
from tests.core.gated_tools.test_checks_humans import AT

Doc = dict[str, Any]


def _forged(sig: str) -> str:
    return ("B" if sig[0] == "A" else "A") + sig[1:]


def _signature(obj: Doc, **change: str) -> Doc:
    return {**obj, "signature": {**obj["signature"], **change}}


def _proof(doc: Doc, i: int, fn: Callable[[Doc], Doc]) -> Doc:
    decisions = list(doc["decisions"])
    decisions[i] = {**decisions[i], "proof": fn(decisions[i]["proof"])}
    return {**doc, "decisions": decisions}


# What is wrong in the approval's body (the gateway signs it again afterwards: only the wrong thing refuses it).
BODY: dict[str, Callable[[Doc], Doc]] = {
    "forged request": lambda d: {
        **d,
        "request": _signature(d["request"], sig=_forged(d["request"]["signature"]["sig"])),
    },
    "stale request": lambda d: {**d, "request": agent_request(d["planDigest"], NOW - timedelta(hours=3))},
    "forged first proof": lambda d: _proof(d, 0, lambda p: _signature(p, sig=_forged(p["signature"]["sig"]))),
    "forged second proof": lambda d: _proof(d, 1, lambda p: _signature(p, sig=_forged(p["signature"]["sig"]))),
    "proof by an unknown key": lambda d: _proof(d, 1, lambda p: _signature(p, kid="acme.com-nobody")),
    "another tool": lambda d: {**d, "toolCall": {**d["toolCall"], "tool": "refund_card"}},
    "expired": lambda d: {**d, "expiresAt": format_ts(NOW - timedelta(minutes=1))},
    "a rejection": lambda d: {**d, "decision": "reject"},
    "routing unchecked": lambda d: {
        **d,
        "routing": {**d["routing"], "checked": {**d["routing"]["checked"], "status": "unchecked"}},
    },
}
# What is wrong with the gateway's own signature (applied last).
SEAL: dict[str, Callable[[Doc], Doc]] = {
    "forged approval": lambda d: _signature(d, sig=_forged(d["signature"]["sig"])),
    "an untrusted gateway": lambda d: sign_object({k: v for k, v in d.items() if k != "signature"}, OTHER),
}
OTHER = SigningKey.generate(roles=["gateway"], kid=gateway_key().kid)
BASE: Doc = issue()
BASE = sign_object({**BASE, "request": agent_request(BASE["planDigest"], NOW)}, gateway_key())


def _wrong(ways: list[str]) -> Doc:
    doc = BASE
    body = [w for w in ways if w in BODY]
    for way in body:
        doc = BODY[way](doc)
    if body:
        doc = sign_object({k: v for k, v in doc.items() if k != "signature"}, gateway_key())
    for way in ways:
        if way in SEAL:
            doc = SEAL[way](doc)
    return doc


def _outcome(doc: Doc, verify_ahead: Callable[..., None] | None) -> tuple[str, ...]:
    try:
        approval = check_approval(
            doc,
            expected=call(),
            requirement=REQ,
            trusted=keyring(),  # fresh keyrings: nothing remembered from the other run
            humans=human_keys(),
            now=AT,
            defined_at=DEFINED_AT,
            agents=agent_keys(),
            verify_ahead=verify_ahead,
        )
    except HatpError as exc:
        return (exc.rule, exc.path, exc.reason)
    return ("accepted", approval.approval_id)


GATE = create_approval_gate(
    SERVER, keyring(), humans=human_keys(), agents=agent_keys(), replay_cache=SqliteReplayCache(":memory:")
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(sorted(BODY) + sorted(SEAL)), min_size=0, max_size=2, unique=True))
def test_on_two_threads_an_approval_wrong_in_two_ways_gets_the_refusal_one_thread_gives(ways: list[str]) -> None:
    doc = _wrong(ways)
    one_thread = _outcome(doc, None)
    assert _outcome(doc, GATE._verify_together) == one_thread
    assert (one_thread[0] == "accepted") == (not ways)


def test_a_busy_verifier_thread_holds_no_call_up_and_every_part_is_still_verified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = create_approval_gate(SERVER, keyring(), humans=human_keys(), agents=agent_keys())
    approval, raw = _parse(BASE)
    parts = signed_parts(raw, approval, keyring(), human_keys(), agent_keys())
    by: list[tuple[int, str]] = []

    def spy(part: SignedPart) -> bool:
        by.append((parts.index(part), threading.current_thread().name))
        return verify_part(part)

    monkeypatch.setattr(gate_module, "verify_part", spy)
    release = threading.Event()
    busy = gate._verifier.submit(release.wait)  # the verifier's one thread, taken
    call_thread = threading.Thread(target=gate._verify_together, args=(parts,), name="the-call")
    try:
        call_thread.start()
        call_thread.join(timeout=30)
        assert not call_thread.is_alive(), "the call waited for a verifier that was busy"
    finally:
        release.set()
        busy.result()
    assert sorted(by) == [(i, "the-call") for i in range(len(parts))]  # each once, all taken back

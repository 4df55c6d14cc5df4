"""signed_parts names exactly the signatures check_approval verifies, over exactly the bytes it verifies, so that a
gate can verify them ahead, together (hatp_mcp/core/gated_tools/signatures.py); and whatever verify_ahead does, the
checks decide: a forged signature is still refused with its own rule."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hatp_mcp.core.gated_tools.checks import _parse, check_approval
from hatp_mcp.core.gated_tools.signatures import SignedPart, signed_parts, verify_part
from hatp_mcp.core.gateway.agents import AgentKeys
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from tests.acme_org import agent_keys, agent_request, human_keys, keyring
from tests.core.gated_tools.test_checks import DEFINED_AT, NOW, REQ, call, issue
from tests.core.gated_tools.test_checks import resigned as gateway_resigned
from tests.core.gated_tools.test_checks_humans import AT, check

Verified = list[tuple[str, bytes, bytes]]


def with_request() -> dict[str, Any]:
    doc = issue()
    return gateway_resigned(doc, request=agent_request(doc["planDigest"], NOW))


def forged(sig: str) -> str:
    return ("B" if sig[0] == "A" else "A") + sig[1:]


@pytest.fixture
def verified(monkeypatch: pytest.MonkeyPatch) -> Iterator[Verified]:
    """Every (kid, signature, message) the checks hand to a keyring, verified or remembered."""
    seen: Verified = []
    real = Keyring.check_signature

    def spy(ring: Keyring, entry: PublicKeyEntry, sig: bytes, message: bytes) -> None:
        seen.append((entry.kid, sig, message))
        real(ring, entry, sig, message)

    monkeypatch.setattr(Keyring, "check_signature", spy)
    yield seen


def parts_of(doc: dict[str, Any], trusted: Keyring, humans: HumanKeys, agents: AgentKeys | None) -> list[SignedPart]:
    approval, raw = _parse(doc)
    return signed_parts(raw, approval, trusted, humans, agents)


def test_the_parts_are_the_gateways_the_agents_and_each_persons_signature_over_the_bytes_the_checks_verify(
    verified: Verified,
) -> None:
    doc = with_request()
    trusted, humans, agents = keyring(), human_keys(), agent_keys()
    parts = parts_of(doc, trusted, humans, agents)
    assert [p.ring for p in parts[:2]] == [trusted, agents.keyring_for(doc["request"]["agent"])]
    assert [p.ring for p in parts[2:]] == [humans.keyring_for(d["proof"]["human"]) for d in doc["decisions"]]
    assert all(verify_part(p) for p in parts)
    ahead = [(p.entry.kid, p.signature, p.message) for p in parts]
    expected = call()  # (loading the fixtures verifies the Directory's signatures: not the approval's)
    verified.clear()
    check_approval(
        doc,
        expected=expected,
        requirement=REQ,
        trusted=trusted,
        humans=humans,
        now=AT,
        defined_at=DEFINED_AT,
        agents=agents,
    )
    assert verified == ahead  # the same triples, in the same order, none left out


def test_without_agent_cards_the_request_is_no_part() -> None:
    assert len(parts_of(with_request(), keyring(), human_keys(), None)) == 3


@pytest.mark.parametrize("where", ["gateway", "request", "proof", "kid", "alg"], ids=lambda w: f"forged-{w}")
def test_a_part_that_does_not_verify_is_left_to_the_checks_which_refuse_it_with_its_own_rule(where: str) -> None:
    doc = with_request()
    if where == "gateway":
        doc = {**doc, "signature": {**doc["signature"], "sig": forged(doc["signature"]["sig"])}}
    elif where == "request":
        req = doc["request"]
        doc = gateway_resigned(
            doc, request={**req, "signature": {**req["signature"], "sig": forged(req["signature"]["sig"])}}
        )
    else:
        d = doc["decisions"][1]
        sig = d["proof"]["signature"]
        change = {"proof": {"sig": forged(sig["sig"])}, "kid": {"kid": "not-a-key"}, "alg": {"alg": "RS256"}}[where]
        decisions = [doc["decisions"][0], {**d, "proof": {**d["proof"], "signature": {**sig, **change}}}]
        doc = gateway_resigned(doc, decisions=decisions)
    trusted, humans, agents = keyring(), human_keys(), agent_keys()
    parts = parts_of(doc, trusted, humans, agents)
    results = [verify_part(p) for p in parts]
    assert results.count(False) == (1 if where in ("gateway", "request", "proof") else 0)
    assert len(parts) == (3 if where in ("kid", "alg") else 4)  # what the checks refuse before verifying: no part
    with pytest.raises(Exception) as warmed:
        check(doc, trusted=trusted, humans=humans, agents=agents)
    with pytest.raises(Exception) as cold:
        check(doc, agents=agent_keys())
    assert (warmed.value.rule, warmed.value.path, str(warmed.value)) == (  # type: ignore[attr-defined]
        cold.value.rule,  # type: ignore[attr-defined]
        cold.value.path,  # type: ignore[attr-defined]
        str(cold.value),
    )
    want = {"gateway": "HATP-GATE-3", "request": "HATP-GATE-26"}.get(where, "HATP-GATE-21")
    assert warmed.value.rule == want  # type: ignore[attr-defined]

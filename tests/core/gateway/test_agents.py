"""Who an agent acts for, proven (issue 12, part 2): Directory-signed agent cards (HATP-CARD-4) and the agent's
signed requests (HATP-GW-47, HATP-GW-48). Each planted violation is refused with its rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hatp_mcp.core.gateway import agents as agents_module
from hatp_mcp.core.gateway.agents import AgentKeys, verify_request
from hatp_mcp.core.model.agent import AgentRequest
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from tests.acme_org import AGENT, agent_doc, agent_key, agent_keys, agent_request, directory_key, h, well_known

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
DIGEST = "sha256:" + "cd" * 32


def refused(raw: object, **kw: object) -> HatpError:
    opts: dict[str, object] = {"subject": "tool-call", "subject_digest": DIGEST, "now": NOW}
    with pytest.raises(HatpError) as e:
        verify_request(raw, agent_keys(), **{**opts, **kw})  # type: ignore[arg-type]
    assert e.value.code == "REQUESTER_NOT_PROVEN"
    return e.value


def test_the_travel_bots_signed_request_proves_it_acts_for_dana() -> None:
    got = verify_request(agent_request(DIGEST, NOW), agent_keys(), subject="tool-call", subject_digest=DIGEST, now=NOW)
    assert got == h("dana") and agent_keys().card(AGENT).acts_for == h("dana")  # type: ignore[union-attr]


def test_HATP_CARD_4_an_agent_card_counts_only_as_the_directory_signed_it() -> None:
    body = {k: v for k, v in agent_doc().items() if k != "signature"}
    cases = {
        "altered": {**agent_doc(), "actsFor": h("bob")},
        "unsigned": body,
        "signed by another key": sign_object(body, SigningKey.generate(["directory"], "rogue-directory")),
        "another issuer": sign_object({**body, "issuer": "https://evil.example/dir"}, directory_key()),
        "acts for a group": sign_object({**body, "actsFor": "human://acme.com/role/finance-approver"}, directory_key()),
        "acts for another org": sign_object({**body, "actsFor": "human://other.org/x"}, directory_key()),
        "not an agent": sign_object({**body, "id": h("mallory")}, directory_key()),
    }
    for case, doc in cases.items():
        agents, ignored = AgentKeys.load(well_known(), [doc])
        assert agents.cards == {} and [i.rule for i in ignored] == ["HATP-CARD-4"], case


def test_HATP_GW_47_a_request_not_signed_by_a_key_on_the_agents_card_proves_nothing() -> None:
    assert refused(None).rule == "HATP-GW-47"
    assert refused({"type": "hatp.agent-request"}).rule == "HATP-GW-47"
    unsigned = {k: v for k, v in agent_request(DIGEST, NOW).items() if k != "signature"}
    assert refused(unsigned).rule == "HATP-GW-47"
    rogue = agent_request(DIGEST, NOW, key=SigningKey.generate(["agent"], "rogue-agent"))
    assert "has no key 'rogue-agent'" in refused(rogue).reason
    unknown = agent_request(DIGEST, NOW, agent="agent://acme.com/other-bot")
    assert "no Directory-signed agent card" in refused(unknown).reason
    forged = {**agent_request(DIGEST, NOW), "nonce": "x" * 20}
    assert "does not verify" in refused(forged).reason


def test_HATP_GW_48_a_request_for_another_person_another_subject_or_stale_is_refused() -> None:
    for_bob = refused(agent_request(DIGEST, NOW, acts_for=h("bob")))  # the travel-bot's key, naming bob
    assert (for_bob.rule, for_bob.path) == ("HATP-GW-48", "$.request.actsFor") and h("dana") in for_bob.reason
    other = refused(agent_request("sha256:" + "ef" * 32, NOW))
    assert (other.rule, other.path) == ("HATP-GW-48", "$.request.subjectDigest")
    assert refused(agent_request(DIGEST, NOW), subject="plan").rule == "HATP-GW-48"
    stale = refused(agent_request(DIGEST, NOW - timedelta(hours=1)))
    assert (stale.rule, stale.path) == ("HATP-GW-48", "$.request.issuedAt")


def test_HATP_GW_47_the_keyring_kept_for_an_agent_card_vouches_for_no_other_key_or_bytes() -> None:
    """AgentKeys builds each card's keyring once (every gated call asks for it). What it keeps is keyed by the
    card's exact keys: a request signed by another key under the card's kid, a request altered after a good one
    verified, or a card replaced by one with another key never meet the keyring built before."""
    good_card = agent_keys().card(AGENT)
    assert good_card is not None
    cards = {AGENT: good_card}
    agents = AgentKeys(cards)
    good = agent_request(DIGEST, NOW)
    opts = {"subject": "tool-call", "subject_digest": DIGEST, "now": NOW}

    def verdict(raw: object) -> str:
        try:
            return verify_request(raw, agents, **opts)  # type: ignore[arg-type]
        except HatpError as exc:
            return f"{exc.rule}: {exc.reason}"

    assert verdict(good) == h("dana")
    assert agents.keyring_for(AGENT) is agents.keyring_for(AGENT)  # built once
    impostor = SigningKey.generate(["agent"], agent_key().kid)  # the card's kid, another key
    assert verdict(agent_request(DIGEST, NOW, key=impostor)).startswith("HATP-GW-47: the agent request's signature")
    assert verdict({**good, "nonce": "n" * 24}).startswith("HATP-GW-47: the agent request's signature")
    assert verdict(good) == h("dana")  # the good request still verifies, the bad ones left nothing behind
    # The Directory re-issues the card with the impostor's key (a rotation): the old key counts no more.
    rotated_key = good_card.keys[0].model_copy(update={"public_key": impostor.public_jwk()["x"]})
    cards[AGENT] = good_card.model_copy(update={"keys": [rotated_key]})
    assert verdict(good).startswith("HATP-GW-47: the agent request's signature")
    assert verdict(agent_request(DIGEST, NOW, key=impostor)) == h("dana")


def _read(raw: object) -> object:
    """What agents._parse makes of `raw`: the request's and the document's wire forms, or the refusal."""
    try:
        got, doc = agents_module._parse(raw, "$.request")
    except HatpError as exc:
        return (exc.rule, exc.path, exc.reason, exc.fix)
    return (got.wire(), dict(doc))


def test_HATP_GW_47_a_parsed_request_verifies_and_refuses_as_its_wire_form_does() -> None:
    good = AgentRequest.model_validate(agent_request(DIGEST, NOW))
    opts = {"subject": "tool-call", "subject_digest": DIGEST, "now": NOW}
    assert verify_request(good, agent_keys(), **opts) == verify_request(good.model_copy(), agent_keys(), **opts)  # type: ignore[arg-type]
    forged = AgentRequest.model_validate({**good.wire(), "nonce": "n" * 24})
    refusals = []
    for raw in (forged, forged.model_copy(), forged.wire()):
        with pytest.raises(HatpError) as err:
            verify_request(raw, agent_keys(), **opts)  # type: ignore[arg-type]
        refusals.append((err.value.rule, err.value.path, err.value.reason))
    assert refusals[0][0] == "HATP-GW-47" and refusals.count(refusals[0]) == 3
    unsigned = AgentRequest.model_validate({**good.wire(), "signature": None})
    assert _read(unsigned) == _read(unsigned.wire()) == _read(unsigned.model_copy())
    assert _read(unsigned)[:2] == ("HATP-GW-47", "$.request")  # type: ignore[index]


def test_HATP_GW_97_a_stale_request_is_refused_with_its_time_in_words() -> None:
    stale = refused(agent_request(DIGEST, NOW - timedelta(hours=1)))
    assert stale.reason == (
        "the agent request was issued at 2026-11-29 09:00 UTC (60 min ago); only requests from the last 600 s count"
    )

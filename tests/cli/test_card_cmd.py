"""`hatp card person|agent`: Directory-signed cards the organisation's readers trust, contacts kept private, an
agent key made 0600, nothing ever overwritten."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.cli.org_layout import OrgLayout, init_org
from hatp_mcp.core.gateway.agents import card_of_key
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.runtime.org import load_agents, load_directory


@pytest.fixture
def org(tmp_path: Path) -> OrgLayout:
    return OrgLayout(init_org(tmp_path / "org", "example.org"))


def test_a_person_card_is_signed_by_the_directory_and_their_email_stays_in_the_contact_book(org: OrgLayout) -> None:
    person = ["card", "person", "--org", str(org.root), "ben", "--display", "Ben Ng", "--role", "finance-approver"]
    assert main([*person, "--authority", "travel.spend=5000:USD", "--email", "ben@example.org"]) == 0
    directory, ignored = load_directory(org.root)
    [card] = directory.cards()
    assert ignored == [] and card.id == "human://example.org/ben" and card.roles == ["finance-approver"]
    assert [c.type for c in card.channels] == ["email", "inbox"] and card.keys == []
    assert "ben@example.org" not in (org.cards / "ben.json").read_text()
    assert json.loads(org.contacts.read_text()) == {"human://example.org/ben": {"email": "ben@example.org"}}
    assert stat.S_IMODE(org.contacts.stat().st_mode) == 0o600


def test_an_agent_card_names_its_person_and_its_new_key_is_private(org: OrgLayout) -> None:
    assert main(["card", "person", "--org", str(org.root), "ann", "--display", "Ann Lee"]) == 0
    assert main(["card", "agent", "--org", str(org.root), "claude", "--acts-for", "ann"]) == 0
    key_file = org.agent_keys / "claude.private.jwk.json"
    key = SigningKey.from_jwk(json.loads(key_file.read_text()))
    card = card_of_key(load_agents(org.root)[0], key)
    assert card is not None and card.acts_for == "human://example.org/ann" and card.id == "agent://example.org/claude"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_card_is_never_overwritten_and_an_agent_needs_its_person_first(
    org: OrgLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["card", "agent", "--org", str(org.root), "claude", "--acts-for", "ann"]) == 1
    assert "no card for human://example.org/ann" in capsys.readouterr().err
    assert list(org.agent_keys.iterdir()) == [] and list(org.agents.iterdir()) == []
    assert main(["card", "person", "--org", str(org.root), "ann", "--display", "Ann Lee"]) == 0
    before = (org.cards / "ann.json").read_bytes()
    assert main(["card", "person", "--org", str(org.root), "ann", "--display", "Someone Else"]) == 1
    assert "never overwritten" in capsys.readouterr().err and (org.cards / "ann.json").read_bytes() == before


def test_a_bad_authority_is_a_bad_call(org: OrgLayout, capsys: pytest.CaptureFixture[str]) -> None:
    person = ["card", "person", "--org", str(org.root), "ben", "--display", "Ben", "--authority", "5000"]
    assert main(person) == 2 and "ACTION=AMOUNT:CUR" in capsys.readouterr().err


def test_a_decision_key_goes_on_the_card_as_its_public_half_only(org: OrgLayout, tmp_path: Path) -> None:
    key = SigningKey.generate(["approver"])
    (tmp_path / "ben.jwk.json").write_text(json.dumps(key.private_jwk()))  # only the public half is taken
    person = ["card", "person", "--org", str(org.root), "ben", "--display", "Ben Ng"]
    assert main([*person, "--decision-key", str(tmp_path / "ben.jwk.json")]) == 0
    [card] = load_directory(org.root)[0].cards()
    [entry] = card.keys
    assert (entry.type, entry.id) == ("ed25519", key.kid) and key.private_jwk()["d"] not in (
        org.cards / "ben.json"
    ).read_text()


def test_update_re_signs_a_card_with_what_is_given_and_keeps_the_rest(
    org: OrgLayout, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    person = ["card", "person", "--org", str(org.root), "ben"]
    assert main([*person, "--update", "--display", "Ben"]) == 1  # nothing to update yet
    assert "issue it first" in capsys.readouterr().err and not (org.cards / "ben.json").exists()
    assert main([*person, "--display", "Ben Ng", "--role", "finance-approver", "--sla-seconds", "600"]) == 0
    key = SigningKey.generate(["approver"])
    (tmp_path / "ben.jwk.json").write_text(json.dumps(key.private_jwk()))
    assert main([*person, "--update", "--decision-key", str(tmp_path / "ben.jwk.json")]) == 0
    assert main([*person, "--update", "--role", "travel-approver"]) == 0
    [card] = load_directory(org.root)[0].cards()
    assert (card.display_name, card.roles, card.sla.decide_seconds) == ("Ben Ng", ["travel-approver"], 600)
    assert [(k.type, k.id) for k in card.keys] == [("ed25519", key.kid)]


def test_keys_new_with_the_person_role_makes_a_decision_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "new", "--role", "person", "--out", str(tmp_path / "ben.jwk.json")]) == 0
    key = SigningKey.from_jwk(json.loads((tmp_path / "ben.jwk.json").read_text()))
    assert set(key.roles) == {"approver"}  # the role a card's decision key is checked with

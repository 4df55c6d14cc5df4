"""Reading an organisation dir: the Directory-signed cards, with wire limits, and never the gateway's contacts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hatp_mcp.core.model.wire import WireError
from hatp_mcp.runtime.org import load_directory, load_human_keys
from tests.acme_org import NAMES, ORG_DIR, h


def test_the_acme_cards_load_and_every_person_has_a_decision_key() -> None:
    directory, ignored = load_directory(ORG_DIR)
    assert ignored == [] and {c.id for c in directory.cards()} == {h(n) for n in NAMES}
    keys = load_human_keys(ORG_DIR)
    assert all(keys.keyring_for(h(n)) is not None for n in NAMES)


def test_the_gateways_contacts_are_never_read_here(tmp_path: Path) -> None:
    org = tmp_path / "org"
    shutil.copytree(ORG_DIR, org)
    (org / "contacts.json").write_bytes(b"\xff not even JSON")
    directory, _ = load_directory(org)
    assert directory.cards()


def test_a_card_that_is_not_json_or_not_an_object_is_refused_with_its_file(tmp_path: Path) -> None:
    org = tmp_path / "org"
    shutil.copytree(ORG_DIR, org)
    (org / "cards" / "zz.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"zz\.json: expected a JSON object"):
        load_directory(org)
    (org / "cards" / "zz.json").write_text("[" * 100 + "]" * 100)
    with pytest.raises(WireError) as err:
        load_directory(org)
    assert err.value.rule == "HATP-OBJ-2" and "zz.json" in err.value.reason

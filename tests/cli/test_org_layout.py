"""An organisation directory made by init_org is an organisation to every reader (the Directory's loaders, the
gateway's settings and relying party, the coordinator's trust lists and pins), its private files are private, and
it is made whole or not at all, never over an existing one (HATP-MCP-36)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from hatp_mcp.cli import org_layout as org_setup
from hatp_mcp.cli.org_layout import DEMO_PARTICIPANTS, OrgLayout, init_org, load_suite
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE, load_trust_list
from hatp_mcp.runtime.gateway.delivery.settings import load_settings
from hatp_mcp.runtime.org import load_agents, load_directory, load_relying_party
from hatp_mcp.store.pin_file import read_pins


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_organisation_is_read_by_the_same_loaders_as_every_other(tmp_path: Path) -> None:
    layout = OrgLayout(init_org(tmp_path / "org", "example.org", inbox_port=18400, gateway_port=18401))
    directory, ignored = load_directory(layout.root)
    assert directory.well_known.organization == "example.org" and directory.cards() == [] and ignored == []
    assert load_agents(layout.root)[0].cards == {}
    settings = load_settings(layout.root)
    assert settings is not None and settings.inbox_url == "http://localhost:18400" and settings.email is None
    rp = load_relying_party(layout.root)
    assert rp is not None and (rp.rp_id, rp.origins) == ("localhost", ("http://localhost:18400",))
    suite = load_suite(layout.root)
    assert (suite.gateway_mcp_port, suite.inbox_port, suite.coordinator_id) == (
        18401,
        18400,
        "coordinator://example.org",
    )
    coordinator = json.loads((layout.data("coordinator") / "public.jwk.json").read_text())
    for receiver in ("gateway", *DEMO_PARTICIPANTS):
        [trusted] = load_trust_list(layout.data(receiver) / TRUST_FILE).entries()
        assert (trusted.kid, trusted.party) == (coordinator["kid"], "coordinator://example.org")
    for p in suite.participants:  # each pinned to a copy, bound to its URI, of the key made for it now
        [pinned] = read_pins(p.keys).entries()
        own = json.loads((p.data / "public.jwk.json").read_text())
        assert (pinned.kid, pinned.party) == (own["kid"], p.uri) and p.keys.parent == layout.trust


def test_HATP_MCP_36_private_keys_are_0600_in_a_0700_folder_and_the_contact_book_is_0600(tmp_path: Path) -> None:
    layout = OrgLayout(init_org(tmp_path / "org", "example.org"))
    assert mode(layout.private) == 0o700 and mode(layout.agent_keys) == 0o700
    assert mode(layout.directory_key) == mode(layout.gateway_key) == mode(layout.contacts) == 0o600
    assert all(mode(k) == 0o600 for k in layout.root.rglob("key.jwk.json"))
    assert "d" not in json.loads(layout.well_known.read_text())["keys"][0]


def test_HATP_MCP_36_an_existing_organisation_is_never_overwritten_and_stays_byte_for_byte(tmp_path: Path) -> None:
    root = init_org(tmp_path / "org", "example.org")
    before = {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(HatpError) as refused:
        init_org(root, "example.org")
    assert (refused.value.rule, refused.value.code) == ("HATP-MCP-36", "ORG_EXISTS")
    assert {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["org"]  # no half-built directory left beside it


def test_an_empty_directory_is_filled_and_a_failure_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    assert (init_org(tmp_path / "empty", "example.org") / "suite.json").exists()

    def disk_full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(org_setup, "write_trust_list", disk_full)
    with pytest.raises(OSError, match="No space left"):
        init_org(tmp_path / "half", "example.org")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_HATP_MCP_35_a_directory_not_made_by_init_org_has_no_suite_and_is_refused(tmp_path: Path) -> None:
    with pytest.raises(HatpError) as refused:
        load_suite(tmp_path)
    assert (refused.value.rule, refused.value.code) == ("HATP-MCP-35", "BAD_SUITE")
    assert "not an organisation made by hatp init-org" in refused.value.reason

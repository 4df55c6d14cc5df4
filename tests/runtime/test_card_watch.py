"""A running gateway uses the cards as the operator re-signs them (HATP-GW-82): a card re-signed by the Directory
counts at the next refresh, with its new keys; a card re-signed by any other key is ignored with its rule (its
passkeys never count); an unusable well-known document keeps the Directory the gateway had."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.core.gateway.directory import IgnoredCard
from hatp_mcp.core.signing.keys import sign_object
from hatp_mcp.runtime.card_watch import CardWatch
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.runtime.org import load_directory
from hatp_mcp.store.gateway_store import SqliteGatewayStore
from tests.acme_org import ORG_DIR, directory_key, gateway_key, h
from tests.passkey_authenticator import SoftAuthenticator


def _card_with(org: Path, name: str, key: dict[str, str], signer: Any) -> None:
    path = org / "cards" / f"{name}.json"
    card = {k: v for k, v in json.loads(path.read_text()).items() if k != "signature"}
    card["keys"] = [*card["keys"], key]
    path.write_text(json.dumps(sign_object(card, signer)))


def _passkeys(gw: GatewayApprover, name: str) -> list[str]:
    card = gw.directory.card(h(name))
    return [k.id for k in card.keys if k.type == "passkey"] if card is not None else []


@pytest.fixture
def org(tmp_path: Path) -> Path:
    shutil.copytree(ORG_DIR, tmp_path / "org")
    return tmp_path / "org"


def test_HATP_GW_82_a_card_the_directory_re_signs_counts_at_the_next_refresh_and_one_signed_by_another_key_never(
    tmp_path: Path, org: Path, clock: FakeClock
) -> None:
    store = SqliteGatewayStore(tmp_path / "gw")
    gw = GatewayApprover(directory=load_directory(org)[0], key=gateway_key(), store=store, clock=clock)
    ignored: list[IgnoredCard] = []
    watch = CardWatch(org, gw.use_directory, on_ignored=ignored.append)
    erin = SoftAuthenticator(h("erin")).card_key()
    try:
        assert watch.refresh() is False  # nothing changed: nothing reloaded
        original = (org / "cards" / "erin.json").read_bytes()
        _card_with(org, "erin", erin, gateway_key())  # the gateway's key is not the Directory's
        assert watch.refresh() is True
        assert gw.directory.card(h("erin")) is None and erin["id"] not in _passkeys(gw, "erin")
        assert [(c.card_id, c.rule) for c in ignored] == [(h("erin"), "HATP-CARD-1")]
        assert h("erin") not in gw.humans.by_human  # her decision keys are gone with the card: fail closed
        (org / "cards" / "erin.json").write_bytes(original)
        _card_with(org, "erin", erin, directory_key())  # the operator's `hatp enrol approve`
        assert watch.refresh() is True
        assert _passkeys(gw, "erin")[-1] == erin["id"] and h("erin") in gw.humans.by_human
    finally:
        store.close()


def test_HATP_GW_82_cards_that_cannot_be_loaded_at_all_leave_the_verified_directory_in_place(
    tmp_path: Path, org: Path, clock: FakeClock
) -> None:
    store = SqliteGatewayStore(tmp_path / "gw")
    before = load_directory(org)[0]
    gw = GatewayApprover(directory=before, key=gateway_key(), store=store, clock=clock)
    errors: list[str] = []
    watch = CardWatch(org, gw.use_directory, on_error=errors.append)
    try:
        (org / ".well-known" / "human-card.json").write_text("{not json")
        assert watch.refresh() is False and gw.directory is before
        assert errors and "the previous ones stay" in errors[0]
    finally:
        store.close()

"""The Directory: only cards its published key signed are trusted; addresses resolve to ranked candidates."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from hatp_mcp.core.gateway.address import parse_address
from hatp_mcp.core.gateway.directory import Criteria, Directory, load_well_known
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.errors import HatpError
from tests.acme_org import ACTION, card_doc, card_docs, directory, gateway_key, h, resigned, well_known

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)


def test_the_fixture_organisation_loads_with_every_card_trusted() -> None:
    d, ignored = Directory.load(well_known(), card_docs())
    assert ignored == []
    assert [c.id for c in d.cards()] == [h(n) for n in ["alice", "bob", "carol", "dana", "erin", "frank"]]
    assert d.organization == "acme.com"


def test_an_unsigned_card_is_ignored_under_HATP_CARD_1_and_the_refusal_says_unsigned() -> None:
    doc = {k: v for k, v in card_doc("alice").items() if k != "signature"}
    d, ignored = Directory.load(well_known(), [doc, card_doc("bob")])
    assert d.card(h("alice")) is None and d.card(h("bob")) is not None
    assert [(i.index, i.card_id, i.rule) for i in ignored] == [(0, h("alice"), "HATP-CARD-1")]
    assert "HATP-SIG-1" in ignored[0].reason


def test_a_forged_card_signed_by_an_unpublished_key_is_ignored_under_HATP_CARD_1() -> None:
    forger = SigningKey.generate(["directory"])
    body = {k: v for k, v in card_doc("erin").items() if k != "signature"}
    body["authority"] = [{"action": ACTION, "maxAmount": [{"value": "1000000", "currency": "USD"}]}]
    d, ignored = Directory.load(well_known(), [sign_object(body, forger)])
    assert d.card(h("erin")) is None
    assert ignored[0].rule == "HATP-CARD-1" and "HATP-SIG-2" in ignored[0].reason


def test_a_card_signed_by_the_gateway_key_is_ignored_because_only_directory_keys_sign_cards() -> None:
    body = {k: v for k, v in card_doc("erin").items() if k != "signature"}
    _d, ignored = Directory.load(well_known(), [sign_object(body, gateway_key())])
    assert ignored[0].rule == "HATP-CARD-1" and "HATP-SIG-5" in ignored[0].reason


def test_an_altered_card_is_ignored_under_HATP_CARD_1_and_the_refusal_says_altered() -> None:
    doc = card_doc("erin")
    doc["authority"][0]["maxAmount"][0]["value"] = "50000"
    d, ignored = Directory.load(well_known(), [doc])
    assert d.card(h("erin")) is None
    assert ignored[0].rule == "HATP-CARD-1" and "HATP-SIG-4" in ignored[0].reason and "altered" in ignored[0].reason


def test_a_card_from_another_issuer_or_organisation_is_ignored_under_HATP_CARD_2() -> None:
    other_issuer = resigned("bob", issuer="https://evil.example/directory")
    other_org = resigned("bob", id="human://evil.example/bob")
    _d, ignored = Directory.load(well_known(), [other_issuer, other_org])
    assert [(i.rule, "issuer" in i.reason or "outside" in i.reason) for i in ignored] == [
        ("HATP-CARD-2", True),
        ("HATP-CARD-2", True),
    ]


def test_a_well_known_document_without_a_gateway_key_is_refused_under_HATP_CARD_3() -> None:
    doc = well_known()
    doc["keys"] = [k for k in doc["keys"] if "gateway" not in k.get("roles", [])]
    with pytest.raises(HatpError) as e:
        load_well_known(doc)
    assert e.value.rule == "HATP-CARD-3" and "gateway" in e.value.reason


def test_a_malformed_well_known_document_is_refused_under_HATP_CARD_3() -> None:
    with pytest.raises(HatpError) as e:
        load_well_known({"type": "hatp.well-known", "organization": "acme.com"})
    assert e.value.rule == "HATP-CARD-3"


def test_a_25000_plan_excludes_alice_and_erin_on_authority_and_dana_on_separation_of_duties() -> None:
    d = directory()
    crit = Criteria(action=ACTION, up_to={"USD": Decimal(25000)}, requester=h("dana"))
    res = d.resolve(parse_address("human://acme.com/role/finance-approver"), crit, NOW)
    assert [(e.human, e.rule, e.reason) for e in res.excluded] == [
        (h("alice"), "HATP-GW-4", "authority"),
        (h("dana"), "HATP-GW-5", "separation-of-duties"),
        (h("erin"), "HATP-GW-4", "authority"),
    ]
    assert res.excluded[0].detail == "authority: limit $10,000.00 is below $25,000.00"
    assert res.excluded[2].detail == "authority: limit $500.00 is below $25,000.00"
    assert {c.human for c in res.eligible} == {h("bob"), h("carol"), h("frank")}


def test_authority_in_another_currency_never_counts() -> None:
    d = directory()
    crit = Criteria(action=ACTION, up_to={"EUR": Decimal(10)})
    res = d.resolve(parse_address("human://acme.com/bob"), crit, NOW)
    assert res.eligible == [] and "currencies are never converted" in res.excluded[0].detail


def test_ranking_prefers_available_people_within_capacity_who_answer_before_the_deadline() -> None:
    away = resigned("bob", availability={"timezone": "UTC", "status": "away"})
    d = directory(extra=[away], only=["carol", "frank"])
    soon = datetime(2026, 11, 29, 11, 30, tzinfo=UTC)  # carol's SLA (1h) fits, frank's (2h) does not
    res = d.resolve(parse_address("human://acme.com/role/finance-approver"), Criteria(decide_by=soon), NOW)
    assert [c.human for c in res.eligible] == [h("carol"), h("frank"), h("bob")]
    assert [c.in_time for c in res.eligible] == [True, False, True]


def test_a_pool_filters_by_skill_and_a_passkey_group_excludes_cards_without_one_under_HATP_GW_8() -> None:
    nokey = resigned("frank", keys=[], skills=["sox"])
    d = directory(extra=[nokey], only=["bob", "carol", "alice"])
    res = d.resolve(parse_address("human://acme.com/pool/security-leads?skill=sox&passkey=required"), Criteria(), NOW)
    assert [c.human for c in res.eligible] == [h("bob"), h("carol")]
    assert [(e.human, e.rule, e.reason) for e in res.excluded] == [(h("frank"), "HATP-GW-8", "no-passkey")]


def test_offline_and_full_people_are_excluded_under_HATP_GW_9() -> None:
    offline = resigned("bob", availability={"timezone": "UTC", "status": "offline"})
    full = resigned("carol", capacity={"maxOpen": 3, "open": 3})
    d = directory(extra=[offline, full], only=["frank"])
    res = d.resolve(parse_address("human://acme.com/role/finance-approver"), Criteria(), NOW)
    assert [(e.human, e.rule, e.reason) for e in res.excluded] == [
        (h("bob"), "HATP-GW-9", "unavailable"),
        (h("carol"), "HATP-GW-9", "capacity"),
    ]
    assert [c.human for c in res.eligible] == [h("frank")]


def test_an_address_in_another_organisation_matches_no_one() -> None:
    res = directory().resolve(parse_address("human://other.com/bob"), Criteria(), NOW)
    assert res.eligible == [] and res.excluded == []


def test_HATP_GW_9_live_open_asks_count_toward_capacity_and_rank_the_least_loaded_first() -> None:
    d = directory(only=["bob", "erin"])  # both SLA 30 min, 1 of 10 open on their cards: bob first by id
    address = parse_address("human://acme.com/role/finance-approver")
    assert [c.human for c in d.resolve(address, Criteria(), NOW).eligible] == [h("bob"), h("erin")]
    busy = d.resolve(address, Criteria(open_asks={h("bob"): 3}), NOW)
    assert [c.human for c in busy.eligible] == [h("erin"), h("bob")]  # 4 of 10 against 1 of 10
    full = d.resolve(address, Criteria(open_asks={h("bob"): 9}), NOW)
    assert [(e.human, e.rule, e.detail) for e in full.excluded] == [
        (h("bob"), "HATP-GW-9", "capacity: 10 of 10 asks already open")
    ]

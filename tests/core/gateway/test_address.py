"""human:// and agent:// addresses: the four forms parse, anything malformed is refused with the reason."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hatp_mcp.core.gateway import address as address_module
from hatp_mcp.core.gateway.address import AddressError, Kind, parse_address, person_address


def test_a_person_address_names_one_person_in_an_organisation() -> None:
    a = parse_address("human://acme.com/bob")
    assert (a.kind, a.org, a.name, a.quorum) == (Kind.PERSON, "acme.com", "bob", None)
    assert a.is_human and not a.is_group
    assert person_address("acme.com", "bob") == a.raw


def test_a_role_address_carries_its_quorum() -> None:
    a = parse_address("human://acme.com/role/finance-approver?quorum=2-of-3")
    assert (a.kind, a.name, a.quorum) == (Kind.ROLE, "finance-approver", (2, 3))


def test_a_pool_address_carries_its_skill_and_passkey_requirement() -> None:
    a = parse_address("human://acme.com/pool/security-leads?skill=sox&passkey=required")
    assert (a.kind, a.name, a.skill, a.passkey) == (Kind.POOL, "security-leads", "sox", True)


def test_an_agent_address_is_not_human() -> None:
    a = parse_address("agent://acme.com/travel-bot")
    assert a.kind is Kind.AGENT and not a.is_human


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("mailto:bob@acme.com", "scheme"),
        ("human://ACME.com/bob", "domain"),
        ("human://acme.com/", "one lower-case segment"),
        ("human://acme.com/Bob", "one lower-case segment"),
        ("human://acme.com/role", "needs a name"),
        ("human://acme.com/team/x", "role/NAME or pool/NAME"),
        ("agent://acme.com/role/x", "one lower-case segment"),
        ("human://acme.com/bob\n", "one lower-case segment"),  # Python's `$` matched before a final newline
        ("human://acme.com/role/finance-approver\n", "role/NAME or pool/NAME"),
    ],
)
def test_a_malformed_address_is_refused_under_HATP_ADDR_1_with_the_reason(raw: str, says: str) -> None:
    with pytest.raises(AddressError) as e:
        parse_address(raw, "approvals[0].address")
    assert e.value.rule == "HATP-ADDR-1"
    assert says in e.value.reason and e.value.path == "approvals[0].address"


@pytest.mark.parametrize("q", ["3-of-2", "0-of-3", "two-of-three", "2-of-101", "2-of-3\n"])
def test_an_impossible_quorum_is_refused_under_HATP_ADDR_2(q: str) -> None:
    with pytest.raises(AddressError) as e:
        parse_address(f"human://acme.com/role/finance-approver?quorum={q}")
    assert e.value.rule == "HATP-ADDR-2"


@pytest.mark.parametrize(
    "raw",
    [
        "human://acme.com/bob?quorum=1-of-1",
        "human://acme.com/role/x?color=red",
        "human://acme.com/role/x?quorum=1-of-2&quorum=2-of-2",
        "human://acme.com/pool/x?passkey=maybe",
        "human://acme.com/pool/x?skill=",
    ],
)
def test_unknown_repeated_or_misplaced_parameters_are_refused_under_HATP_ADDR_3(raw: str) -> None:
    with pytest.raises(AddressError) as e:
        parse_address(raw)
    assert e.value.rule == "HATP-ADDR-3"


# An address parsed once is remembered (address.py's _parsed); the uncached parser is the oracle.
_PIECES = [
    "human",
    "agent",
    "HUMAN",
    "://",
    "acme.com",
    "Acme.com",
    "acme",
    "/",
    "bob",
    "Bob",
    "role",
    "pool",
    "finance-approver",
    "?",
    "quorum=2-of-3",
    "quorum=3-of-2",
    "skill=sox",
    "passkey=required",
    "&",
    "x=1",
    " ",
]


def _outcome(raw: object, path: str) -> object:
    try:
        return parse_address(raw, path)  # type: ignore[arg-type]
    except AddressError as exc:
        return (exc.rule, exc.reason, exc.path, exc.fix)


def _oracle(raw: object, path: str) -> object:
    try:
        return address_module._parse(raw, path)  # type: ignore[arg-type]
    except AddressError as exc:
        return (exc.rule, exc.reason, exc.path, exc.fix)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_PIECES), max_size=9).map("".join), min_size=1, max_size=6),
    st.sampled_from(["$", "requires.address", "$.routing.requester"]),
)
def test_a_remembered_address_parses_as_the_uncached_parser_does_refusals_with_each_calls_path(
    raws: list[str], path: str
) -> None:
    # well-formed ones mixed in, so that a remembered entry is met by strings that differ from it only slightly
    raws = [*raws, "human://acme.com/bob", "human://acme.com/role/finance-approver?quorum=2-of-3"]
    for raw in raws + [r.upper() for r in raws] + raws[::-1]:
        assert _outcome(raw, path) == _oracle(raw, path)
        assert _outcome(raw, "$.other") == _oracle(raw, "$.other")


def test_only_exact_strings_are_remembered_and_refusals_are_not() -> None:
    class Text(str):
        pass

    address_module._parsed.cache_clear()
    good = parse_address("human://acme.com/bob")
    assert parse_address("human://acme.com/bob") is good  # remembered
    assert parse_address(Text("human://acme.com/bob")) == good  # parsed on its own: not a `str` exactly
    with pytest.raises(AddressError) as first:
        parse_address("human://acme.com/role/x?quorum=3-of-2", "requires.address")
    with pytest.raises(AddressError) as again:
        parse_address("human://acme.com/role/x?quorum=3-of-2", "$.elsewhere")
    assert (first.value.rule, first.value.path, again.value.path) == ("HATP-ADDR-2", "requires.address", "$.elsewhere")
    assert address_module._parsed.cache_info().currsize == 1  # only the good one
    for bad in (None, 42, True, ["human://acme.com/bob"]):
        assert _outcome(bad, "$.x") == _oracle(bad, "$.x")

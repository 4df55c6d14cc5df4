"""The callers file and bearer tokens of the journal (HATP-JRN-17) and the coordinator (HATP-MCP-53): only digests
are kept, a malformed file is refused at start, a header maps to its caller only with the exact token, and only
an entry that says so sees every transaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.mcp.http_callers import CallerTokens, hash_token, new_token, write_callers


def test_a_token_maps_to_its_caller_and_nothing_else_does_HATP_JRN_17() -> None:
    mine, theirs = new_token(), new_token()
    tokens = CallerTokens.parse(
        {"callers": {"a": {"tokenSha256": hash_token(mine)}, "b": {"tokenSha256": hash_token(theirs)}}}
    )
    assert tokens.caller_of(f"Bearer {mine}") == "a" and tokens.caller_of(f"Bearer {theirs}") == "b"
    for header in (None, "", mine, f"Basic {mine}", f"Bearer {mine}x", f"Bearer {hash_token(mine)}", "Bearer "):
        assert tokens.caller_of(header) is None, header  # the digest itself is not a token


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({}, "callers"),
        ({"callers": {}}, "callers"),
        ({"callers": {"a": {"token": "plain"}}}, "tokenSha256"),
        ({"callers": {"a": {"tokenSha256": "ABC"}}}, "64 lowercase hex"),
        ({"callers": {"a": {"tokenSha256": "0" * 64}, "b": {"tokenSha256": "0" * 64}}}, "same token"),
        ({"callers": {"a": {"tokenSha256": "0" * 64, "sees": "everything"}}}, "sees"),
    ],
)
def test_a_malformed_callers_file_is_refused_HATP_JRN_17(doc: object, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        CallerTokens.parse(doc)


def test_HATP_MCP_53_only_a_caller_the_operator_granted_sees_every_transaction_and_the_file_holds_no_token(
    tmp_path: Path,
) -> None:
    tokens = {"agent://acme.com/travel-bot": new_token(), "operator://acme.com/ops": new_token()}
    path = write_callers(tmp_path / "callers.json", tokens, sees_all=["operator://acme.com/ops"])
    text = path.read_text()
    parsed = CallerTokens.parse(json.loads(text))
    assert parsed.sees_all == {"operator://acme.com/ops"}
    assert all(token not in text for token in tokens.values())
    assert path.stat().st_mode & 0o077 == 0  # owner-only

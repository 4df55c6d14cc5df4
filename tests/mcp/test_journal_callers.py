"""The journal's callers file and bearer tokens (HATP-JRN-17): only digests are kept, a malformed file is refused
at start, and a header maps to its caller only with the exact token."""

from __future__ import annotations

import pytest

from hatp_mcp.mcp.journal_callers import CallerTokens, hash_token, new_token


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
    ],
)
def test_a_malformed_callers_file_is_refused_HATP_JRN_17(doc: object, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        CallerTokens.parse(doc)

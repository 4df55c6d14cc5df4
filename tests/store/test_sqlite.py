"""Row JSON: what a store writes reads back exactly, including what the fast encoder cannot write."""

from __future__ import annotations

import json

import pytest

from hatp_mcp.store.sqlite import json_text


@pytest.mark.parametrize(
    "obj",
    [
        {"type": "hatp.event", "seq": 3, "body": {"a": [1, "two", None, True]}, "at": "2026-11-29T10:00:00Z"},
        {"big": 2**70, "negative": -(2**65)},  # beyond 64 bits: orjson refuses, the exact encoder writes it
        {"text": "ümlaut \u2028 and \U0001f600"},
        {"float": 0.1},
    ],
)
def test_row_json_reads_back_exactly(obj: dict[str, object]) -> None:
    assert json.loads(json_text(obj)) == obj

"""bench/txn.py's count of the Ed25519 work the trips themselves do, which its floor must not exceed: counted on
real trips, a signature the keyring remembers is not counted as verified."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import anyio

from bench.txn import crypto_per_trip, ed25519_only, trips
from hatp_mcp.core.signing import keys


def test_the_trips_sign_and_verify_at_least_what_the_floor_signs_and_verifies(tmp_path: Path) -> None:
    signs, verifies = crypto_per_trip(tmp_path / "counted.db", 3, 3)
    _seconds, records, _ring, _appends = anyio.run(trips, tmp_path / "records.db", 3, 3)
    _t, floor_signs, floor_verifies = ed25519_only(records)
    assert floor_signs > 0 and floor_verifies > 0
    assert signs >= floor_signs and verifies >= floor_verifies


def test_a_signature_found_in_the_keyrings_memo_is_not_counted_as_verified(tmp_path: Path) -> None:
    _signs, remembered = crypto_per_trip(tmp_path / "memo.db", 3, 3)
    with mock.patch.object(keys, "_REMEMBERED", 0):  # no keyring remembers: every check verifies
        _signs, every_check = crypto_per_trip(tmp_path / "none.db", 3, 3)
    assert 0 < remembered < every_check

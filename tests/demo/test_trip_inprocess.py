"""The in-process trip demo runs both transactions, prints their timelines and verifies both records."""

from __future__ import annotations

import pytest

from demo import trip_inprocess


def test_the_in_process_demo_commits_then_aborts_and_both_records_verify(capsys: pytest.CaptureFixture[str]) -> None:
    assert trip_inprocess.main() == 0
    out = capsys.readouterr().out
    assert "record.closed     COMMITTED after 18 events" in out
    assert "room: votes no (SOLD_OUT)" in out and "ABORTED after" in out
    assert out.count("✓ verify") == 2

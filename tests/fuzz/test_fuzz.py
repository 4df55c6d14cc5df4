"""Every parser and boundary under hostile input gives a clean outcome: accepted, or refused with a rule and one
line; never a traceback. A bounded budget here (HATP_FUZZ_EXAMPLES, default 60 per target); `make fuzz` runs
100,000 per target and prints the counts."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.inputs import INPUTS
from tests.fuzz.targets import TARGETS

EXAMPLES = int(os.environ.get("HATP_FUZZ_EXAMPLES", "60"))


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_hostile_input_gives_a_clean_outcome(name: str) -> None:
    target, kind = TARGETS[name]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the suite's budget is the same inputs every run; `make fuzz` explores
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(INPUTS[kind])
    def run(value: Any) -> None:
        assert target(value) in ("accepted", "refused")

    run()

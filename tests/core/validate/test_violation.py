"""core/validate/violation.py: the violation record, and its fast builder for validators that report in hot loops."""

from __future__ import annotations

import dataclasses

import pytest

from hatp_mcp.core.validate.violation import Violation, violation


def test_the_fast_builder_makes_the_same_frozen_violation_as_the_constructor() -> None:
    built = violation("undo-ttl", "steps[3].maxDurationSeconds", "Declare maxDurationSeconds.")
    made = Violation(rule="undo-ttl", path="steps[3].maxDurationSeconds", message="Declare maxDurationSeconds.")
    assert type(built) is Violation
    assert built == made and hash(built) == hash(made) and repr(built) == repr(made)
    assert built.to_dict() == made.to_dict()
    # every field is set (a field added to Violation and not to the builder would fail here)
    assert dataclasses.astuple(built) == dataclasses.astuple(made)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.rule = "schema"  # type: ignore[misc]
    assert built.rule == "undo-ttl"

"""The bounded mutation run `make test` makes: each sampled rule's check switched off in a copy of the repository
fails a test that names the rule, and the few other rules' tests run beside it still pass."""

from __future__ import annotations

from tests.mutation.run import run_rules
from tests.mutation.sample import SAMPLE


def test_switching_off_each_sampled_check_fails_its_planted_violations_and_only_those() -> None:
    outcomes = run_rules(SAMPLE, jobs=2, progress=False)
    assert {o.rule: o.result for o in outcomes} == dict.fromkeys(SAMPLE, "killed"), {
        o.rule: o.detail for o in outcomes if o.result != "killed"
    }
    for o in outcomes:
        assert o.sites and o.ran >= 1 and o.killer.startswith("tests/")
        assert not o.others_failed, f"{o.rule}: with its check off, other rules' tests failed too: {o.others_failed}"

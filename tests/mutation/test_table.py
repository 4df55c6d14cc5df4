"""spec/mutation.md is the last mutation run over the current rules and code, and every check it switched off was
noticed: a rule whose check survives (no test fails with it off) fails here unless tests/mutation/exemptions.py
gives the reason. This is the rule-coverage check a mention of the id cannot pass (tests/test_spec_rules.py only
asks that some test names each rule)."""

from __future__ import annotations

from tests.mutation.exemptions import EXEMPT
from tests.mutation.run import TABLE, read_rows
from tests.mutation.sites import find_sites
from tests.test_spec_rules import spec_rules

RERUN = "re-run those rows: `.venv/bin/python -m tests.mutation.run --write --rules {}`"


def test_the_table_has_a_row_for_every_rule_with_as_many_sites_as_the_code_has_now() -> None:
    rows = read_rows()
    rules = list(spec_rules())
    assert list(rows) == rules, RERUN.format(" ".join(sorted(set(rules) ^ set(rows))))
    found = find_sites()
    drifted = sorted(
        r
        for r, row in rows.items()
        if row["sites switched off"].split()[0] != str(len(found.sites.get(r, [])))
        or row["reports not switchable"] != str(len(found.unmutable.get(r, [])))
    )
    assert not drifted, f"{TABLE.name}: the checks of {drifted} moved; " + RERUN.format(" ".join(drifted))


def test_every_rule_with_a_check_site_has_a_test_that_fails_when_the_check_is_off() -> None:
    not_killed = {
        r: row["result"]
        for r, row in read_rows().items()
        if row["sites switched off"] != "0"
        and row["result"] != "killed"
        and not (row["result"] == "exempt: survived" and EXEMPT.get(r))
    }
    assert not not_killed, (
        f"checks no planted violation notices when switched off: {not_killed}; write the test that breaks the rule "
        "and asserts its refusal (or name the reason in tests/mutation/exemptions.py)"
    )


def test_an_exemption_names_a_rule_that_survives_and_says_why() -> None:
    rows = read_rows()
    stale = sorted(r for r in EXEMPT if r not in rows or rows[r]["result"] != "exempt: survived")
    assert not stale, f"exempt but not surviving any more (drop them from tests/mutation/exemptions.py): {stale}"
    assert all(len(reason) > 20 for reason in EXEMPT.values())

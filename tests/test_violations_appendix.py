"""spec/violations.md is what the tests plant: regenerating it from the test functions changes nothing."""

from __future__ import annotations

from pathlib import Path

from tests import violations_appendix as appendix
from tests.test_spec_rules import spec_rules


def test_the_appendix_is_generated_from_the_suite_and_has_not_drifted() -> None:
    assert appendix.OUT.read_text() == appendix.generated(), "spec/violations.md drifted: run `make violations`"
    assert len(set(appendix.planted()) & set(spec_rules())) >= 200  # nearly every rule is broken by name


def test_a_rule_is_credited_to_a_test_function_that_names_it_never_to_a_comment_or_a_helper(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_example.py").write_text(
        "# HATP-SIG-1 in a comment credits nothing\n"
        "def helper_HATP_SIG_2():\n    return 'HATP-SIG-2'\n"
        "def test_a_forged_signature_is_refused_HATP_SIG_4():\n    pass\n"
        "def test_an_unknown_kid():\n    assert 'HATP-SIG-3' == 'HATP-SIG-3'\n"
        "def test_with_a_comment():\n    pass  # HATP-SIG-5\n"
    )
    found = appendix.planted(tmp_path)
    assert found == {
        "HATP-SIG-4": [("tests/test_example.py", "test_a_forged_signature_is_refused_HATP_SIG_4")],
        "HATP-SIG-3": [("tests/test_example.py", "test_an_unknown_kid")],
    }


def test_every_spec_rule_is_named_by_a_test_function_not_only_by_a_comment() -> None:
    missing = sorted(set(spec_rules()) - set(appendix.planted()))
    assert not missing, f"rules no test function names (only comments or helpers): {missing}"
